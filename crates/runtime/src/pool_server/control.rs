//! The pool's control plane as its clients speak it (`cordillera pool create-volume`,
//! `add-array`, `replace-member`, `scrub`): the HTTP request each sends, and its answer in
//! words. The server side is `serve_http`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use super::{percent_encode, CreateVolume, PoolStatus};
use crate::http::http_request;

fn answer(body: &str) -> Result<serde_json::Value> {
    serde_json::from_str(body).context("the pool's answer")
}

/// Places volume `c` and says where it went and why.
pub fn create_volume(server: SocketAddr, c: &CreateVolume) -> Result<String> {
    let v = answer(&http_request(
        server,
        "POST",
        &format!("/volumes?{}", c.to_query()),
    )?)?;
    let arrays = v["arrays"]
        .as_array()
        .map(|x| {
            x.iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let mut out = format!(
        "volume {}: {} on array(s) {arrays}, stripe unit {} KiB; NBD export {:?}\n",
        c.name,
        v["policy"].as_str().unwrap_or("?"),
        v["stripe_unit_bytes"].as_u64().unwrap_or(0) >> 10,
        c.name
    );
    for r in v["reasons"].as_array().into_iter().flatten() {
        out.push_str(&format!("  - {}\n", r.as_str().unwrap_or("")));
    }
    Ok(out)
}

/// Adds the array of `paths` (made absolute; `disk_bytes` of each member when given) and says
/// which wide volumes are restriped onto it.
pub fn add_array(server: SocketAddr, paths: &str, disk_bytes: Option<u64>) -> Result<String> {
    let paths = paths
        .split(',')
        .map(|p| {
            let abs = std::path::absolute(p).context("the array's path")?;
            abs.to_str()
                .map(str::to_string)
                .ok_or_else(|| anyhow!("{}: not a UTF-8 path", abs.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let path = paths.join(",");
    let mut query = format!("/arrays?path={}", percent_encode(&path));
    if let Some(b) = disk_bytes {
        query.push_str(&format!("&disk_bytes={b}"));
    }
    let v = answer(&http_request(server, "POST", &query)?)?;
    let mut out = format!("added array {path}\n");
    for name in v["restriping"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  restriping wide volume {} onto it (see `cordillera pool status`)\n",
            name.as_str().unwrap_or("?")
        ));
    }
    for why in v["not_restriped"].as_array().into_iter().flatten() {
        out.push_str(&format!("  {}\n", why.as_str().unwrap_or("")));
    }
    Ok(out)
}

/// Puts the disk at `path` in as member `member` of array `array`; with `wait`, follows the
/// rebuild (a progress line on standard error every half second) until the member is in sync,
/// or fails if it fails again.
pub fn replace_member(
    server: SocketAddr,
    array: usize,
    member: usize,
    path: &std::path::Path,
    wait: bool,
) -> Result<()> {
    let abs = std::path::absolute(path).context("the new member's path")?;
    let p = abs
        .to_str()
        .ok_or_else(|| anyhow!("{}: not a UTF-8 path", abs.display()))?;
    let query = format!(
        "/replace-member?array={array}&member={member}&path={}",
        percent_encode(p)
    );
    http_request(server, "POST", &query)?;
    println!("array {array} member {member}: {p} put in; rebuilding");
    if !wait {
        return Ok(());
    }
    let started = Instant::now();
    let mut shown = false;
    loop {
        let body = http_request(server, "GET", "/status")?;
        let s: PoolStatus = serde_json::from_str(&body).context("the pool's status")?;
        let m = s
            .arrays
            .get(array)
            .and_then(|x| x.members.as_ref())
            .ok_or_else(|| anyhow!("array {array} is not a member array"))?;
        let state = &m.members[member];
        match state.state.as_str() {
            "in-sync" => {
                if shown {
                    eprintln!();
                }
                println!(
                    "array {array} member {member}: rebuilt, {} rows in {:.1} s",
                    m.rows,
                    started.elapsed().as_secs_f64()
                );
                return Ok(());
            }
            "failed" => {
                return Err(anyhow!(
                    "array {array} member {member}: failed again during the rebuild (see the pool's log)"
                ))
            }
            _ => {
                shown = true;
                let done = state.rebuilt_rows.unwrap_or(0);
                let secs = started.elapsed().as_secs_f64().max(1e-3);
                eprint!(
                    "\r  rebuilding: {done}/{} rows ({:.0} %), {:.1} rows/s   ",
                    m.rows,
                    100.0 * done as f64 / m.rows.max(1) as f64,
                    done as f64 / secs
                );
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Scrubs array `array` (repairing with `repair`) and says what it found; inconsistent rows
/// left unrepaired are an error.
pub fn scrub(server: SocketAddr, array: usize, repair: bool) -> Result<String> {
    let query = format!(
        "/scrub?array={array}{}",
        if repair { "&repair=1" } else { "" }
    );
    let v = answer(&http_request(server, "POST", &query)?)?;
    let mismatched = v["mismatched"].as_array().map_or(0, |m| m.len());
    let mut out = format!(
        "array {array}: {} rows checked, {} inconsistent{}, {} rows degraded (a member lost: not checked)\n",
        v["rows"],
        mismatched,
        if repair { format!(", {} repaired", v["repaired"]) } else { String::new() },
        v["degraded"]
    );
    if mismatched > 0 {
        out.push_str(&format!("  rows: {}\n", v["mismatched"]));
        if !repair {
            print!("{out}");
            return Err(anyhow!(
                "array {array}: {mismatched} inconsistent rows (run with --repair)"
            ));
        }
    }
    Ok(out)
}
