//! fio's NBD engine against an export: a time-based run, its IOPS and bytes per second (reads
//! and writes summed).

use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

pub(crate) struct Fio {
    pub(crate) iops: f64,
    pub(crate) bytes_per_s: f64,
    /// fio's own CPU (user and system) over its run, as a share of one CPU.
    pub(crate) client_cpu: f64,
    /// Seconds from fio's start to its exit (its ramp and its connection included).
    pub(crate) wall_s: f64,
}

/// A time-based fio run of `rw` (fio's `--rw`: `randread`, `randrw`, `write`, …) over the
/// first `region` bytes; `extra` adds fio options (e.g. `--rwmixread=70`).
pub(crate) fn fio(
    uri: &str,
    rw: &str,
    bs: &str,
    depth: u32,
    seconds: u64,
    region: u64,
    extra: &[&str],
) -> Result<Fio> {
    let mut args = vec![
        format!("--rw={rw}"),
        format!("--bs={bs}"),
        format!("--iodepth={depth}"),
        format!("--size={region}"),
        format!("--runtime={seconds}"),
        "--time_based".into(),
        "--ramp_time=1".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    fio_run(uri, &args)
}

/// fio's NBD engine on `uri`, one job, JSON output; the caller adds the load's options.
pub(crate) fn fio_command(uri: &str) -> Command {
    let mut c = Command::new("fio");
    c.args([
        "--name=bench",
        "--ioengine=nbd",
        &format!("--uri={uri}"),
        "--output-format=json",
    ]);
    c
}

/// Runs fio's NBD engine on `uri` with `args`; reads and writes are summed.
pub(crate) fn fio_run(uri: &str, args: &[String]) -> Result<Fio> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    // On the client's CPU when the benchmark keeps client and servers apart (`crate::cpus`).
    let began = std::time::Instant::now();
    let out = crate::cpus::on_cpu(crate::cpus::CLIENT_CPU, || {
        fio_command(uri).args(args).output()
    })
    .context("cannot run fio (install it: apt-get install fio)")?;
    let wall_s = began.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("fio failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON document.
    let json = &text[text.find('{').ok_or_else(|| anyhow!("no JSON from fio"))?..];
    let v: serde_json::Value = serde_json::from_str(json).context("fio's JSON")?;
    let job = &v["jobs"][0];
    if job["error"].as_i64().unwrap_or(0) != 0 {
        bail!("fio reported error {} on {uri}", job["error"]);
    }
    let sum = |field: &str| {
        job["read"][field].as_f64().unwrap_or(0.0) + job["write"][field].as_f64().unwrap_or(0.0)
    };
    let percent = |field: &str| job[field].as_f64().unwrap_or(0.0) / 100.0;
    Ok(Fio {
        iops: sum("iops"),
        bytes_per_s: sum("bw_bytes"),
        client_cpu: percent("usr_cpu") + percent("sys_cpu"),
        wall_s,
    })
}
