//! `cordillera bench tls`: what TLS costs on the NBD port, against nbdkit with the same
//! pre-shared key, every figure measured in the same run.
//!
//! The servers: `volume serve --policy baseline` (the volume server's NBD path without
//! off-load; no store) and `nbdkit file`, each on its own copy of a file whose region is filled
//! with data, each once with `--tls require` and the same keys file and once without TLS. The
//! client is `nbdcopy` (libnbd's, unmodified) for both: fio's NBD engine cannot take a keys
//! file (libnbd refuses `tls-psk-file` in a URI unless the program allows local files, and fio
//! does not). Loads, one connection each:
//!
//! - 1 MiB writes, 8 in flight: the region copied from a local file onto the export (MB/s);
//! - 1 MiB reads, 8 in flight: the export copied to `null:` (MB/s);
//! - 4 KiB reads, 32 in flight: the export copied to `null:` in 4 KiB requests (requests/s).
//!   They are sequential (nbdcopy reads in order): the per-request cost of TLS records and
//!   the server's path, not the disk's seeks, since the file sits in the page cache.
//!
//! Reads copy the whole export, 56 KiB (the volume: its label is reserved) or 64 KiB (nbdkit)
//! longer than the region the rates are computed from: under 0.03 % at the default 256 MiB.
//!
//! Each round runs every load on the four servers, the order of ours and nbdkit's alternating
//! from round to round; figures are medians of `--repeat` rounds, and each ratio is the median
//! of the rounds' ratios. As in `volume bench`: on a machine with two CPUs or more the servers
//! run on CPU 1 and nbdcopy on CPU 0 (`crate::cpus`; `--no-pin` leaves them to the scheduler),
//! and nbdkit runs with glibc's mmap threshold fixed (`volume_bench::NBDKIT_MALLOC`): every
//! load here starts a fresh nbdkit and lasts a fraction of a second, all of it inside the
//! allocator's warm-up otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cpus::{on_cpu, CLIENT_CPU, SERVER_CPU};
use crate::volume_bench::median;
use anyhow::{bail, Context, Result};
use clap::Args;
use cordillera_procs::process::{free_addr, Bounded, Proc};
use serde::Serialize;

#[derive(Args)]
pub struct TlsBenchArgs {
    /// Directory for the files (a fresh one under the system's temporary folder by default).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Bytes of the region each load moves (k, m, g suffixes).
    #[arg(long, default_value = "256m")]
    region: String,
    /// Rounds; the figures are medians.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    #[arg(long)]
    json: bool,
    /// Leave nbdcopy and the servers where the scheduler puts them (by default, on two CPUs or
    /// more, the servers run on CPU 1 and nbdcopy on CPU 0, as on two machines).
    #[arg(long)]
    no_pin: bool,
}

/// One load: nbdcopy's request size and requests in flight, and its direction.
#[derive(Clone, Copy)]
struct Load {
    name: &'static str,
    request_bytes: u64,
    in_flight: u32,
    write: bool,
}

const LOADS: [Load; 3] = [
    Load {
        name: "write_1m",
        request_bytes: 1 << 20,
        in_flight: 8,
        write: true,
    },
    Load {
        name: "read_1m",
        request_bytes: 1 << 20,
        in_flight: 8,
        write: false,
    },
    Load {
        name: "read_4k",
        request_bytes: 4096,
        in_flight: 32,
        write: false,
    },
];

/// One server under test.
struct Server {
    _proc: Proc,
    url: String,
}

#[derive(Serialize, Clone, Debug, Default)]
struct Row {
    load: &'static str,
    unit: &'static str,
    volume_tls: f64,
    nbdkit_tls: f64,
    /// ours ÷ nbdkit, both over TLS (median of the rounds' ratios).
    ratio_tls: f64,
    volume_plain: f64,
    nbdkit_plain: f64,
    ratio_plain: f64,
    /// TLS ÷ plain for each server: what TLS costs it.
    volume_tls_over_plain: f64,
    nbdkit_tls_over_plain: f64,
    /// The rounds' TLS ratios, lowest to highest.
    ratio_tls_rounds: Vec<f64>,
    /// Whether the servers ran on CPU 1 and nbdcopy on CPU 0.
    pinned: bool,
}

/// A region of `bytes` filled with data that does not compress, plus 64 KiB (a volume's
/// label and reserve).
fn fill(path: &Path, bytes: u64) -> Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut chunk = vec![0u8; 1 << 20];
    let mut done = 0;
    while done < bytes {
        for word in chunk.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            word.copy_from_slice(&x.to_le_bytes());
        }
        let n = (bytes - done).min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])?;
        done += n as u64;
    }
    f.into_inner()?.set_len(bytes + (64 << 10))?;
    Ok(())
}

fn volume(me: &Path, base: &Path, keys: Option<&Path>) -> Result<Server> {
    let mut args: Vec<String> = ["volume", "serve", "--format", "--policy", "baseline"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(["--nbd".into(), "127.0.0.1:0".into(), "--base".into()]);
    args.push(base.display().to_string());
    if let Some(keys) = keys {
        args.extend(["--tls".into(), "require".into(), "--tls-psk".into()]);
        args.push(keys.display().to_string());
    }
    let (proc, found) = on_cpu(SERVER_CPU, || {
        Proc::spawn_until(me, &args, &["cordillera volume: NBD export at nbd://"])
    })
    .map_err(anyhow::Error::msg)?;
    Ok(Server {
        _proc: proc,
        url: url(found[0].trim(), keys),
    })
}

fn nbdkit(base: &Path, keys: Option<&Path>) -> Result<Server> {
    let addr = free_addr()?;
    let mut cmd = Command::new("nbdkit");
    cmd.env("GLIBC_TUNABLES", crate::volume_bench::NBDKIT_MALLOC)
        .args(["--foreground", "--exit-with-parent", "-i", "127.0.0.1"])
        .args(["--port", &addr.port().to_string()]);
    if let Some(keys) = keys {
        cmd.arg("--tls=require")
            .arg(format!("--tls-psk={}", keys.display()));
    }
    cmd.arg("file").arg(base).stderr(Stdio::null());
    let child = on_cpu(SERVER_CPU, || cmd.spawn())
        .context("cannot run nbdkit (install it: apt-get install nbdkit)")?;
    let proc = Proc::adopt(child);
    for _ in 0..200 {
        if std::net::TcpStream::connect(addr).is_ok() {
            return Ok(Server {
                _proc: proc,
                url: url(&addr.to_string(), keys),
            });
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    bail!("nbdkit did not start listening on {addr}")
}

fn url(addr: &str, keys: Option<&Path>) -> String {
    match keys {
        Some(k) => format!("nbds://bench@{addr}/?tls-psk-file={}", k.display()),
        None => format!("nbd://{addr}/"),
    }
}

/// Runs `load` against `url` once; its rate (bytes/s for 1 MiB loads, requests/s for 4 KiB).
fn measure(load: Load, url: &str, source: &Path, region: u64) -> Result<f64> {
    let mut cmd = Command::new("nbdcopy");
    cmd.arg(format!("--request-size={}", load.request_bytes))
        .arg(format!("--requests={}", load.in_flight))
        .args(["--connections=1", "--threads=1", "--flush"]);
    if load.write {
        cmd.arg(source).arg(url);
    } else {
        // Only the region: the volume's export is 8 KiB shorter than the file.
        cmd.arg(url).arg("null:");
    }
    let started = Instant::now();
    let out = on_cpu(CLIENT_CPU, || cmd.output_within(Duration::from_secs(600)))
        .map_err(anyhow::Error::msg)?;
    let seconds = started.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "nbdcopy {} on {url}: {}",
            load.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let bytes = region as f64;
    Ok(if load.request_bytes >= 1 << 20 {
        bytes / seconds / 1e6
    } else {
        bytes / load.request_bytes as f64 / seconds
    })
}

pub fn run(a: TlsBenchArgs) -> Result<()> {
    crate::cpus::allow_pinning(!a.no_pin);
    let region = cordillera_models::presets::parse_size(&a.region).map_err(anyhow::Error::msg)?;
    if region < 16 << 20 || a.repeat == 0 {
        bail!("--region must be at least 16m and --repeat at least 1");
    }
    let (dir, _scratch) =
        crate::volume_bench::work_dir(&a.dir, &std::env::temp_dir(), "tls-bench")?;
    let me = crate::this_program()?;
    let keys = dir.join("keys.psk");
    // A key for this run only (the bench measures, it protects nothing).
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let key: String = (0..4u64)
        .map(|i| format!("{:016x}", cordillera_types::rng::mix64(seed ^ i)))
        .collect();
    std::fs::write(&keys, format!("bench:{key}\n"))?;
    let source = dir.join("source");
    fill(&source, region)?;
    // The region the writes copy: the source without its 64 KiB tail.
    let region_file = dir.join("region");
    std::fs::copy(&source, &region_file)?;
    std::fs::File::options()
        .write(true)
        .open(&region_file)?
        .set_len(region)?;
    // Per load, per server (ours TLS, ours plain, nbdkit TLS, nbdkit plain), per round.
    let mut figures = vec![vec![Vec::new(); 4]; LOADS.len()];
    for round in 0..a.repeat {
        for (l, &load) in LOADS.iter().enumerate() {
            let ours_first = (round + l) % 2 == 0;
            for tls in [true, false] {
                let k = tls.then_some(keys.as_path());
                let order = if ours_first {
                    [true, false]
                } else {
                    [false, true]
                };
                for ours in order {
                    let base = dir.join(if ours { "volume.base" } else { "nbdkit.base" });
                    std::fs::copy(&source, &base)?;
                    let server = if ours {
                        volume(&me, &base, k)?
                    } else {
                        nbdkit(&base, k)?
                    };
                    let rate = measure(load, &server.url, &region_file, region)?;
                    let slot = usize::from(!ours) * 2 + usize::from(!tls);
                    figures[l][slot].push(rate);
                    eprintln!(
                        "bench tls: round {} {} {} {}: {rate:.1}",
                        round + 1,
                        load.name,
                        if ours { "volume" } else { "nbdkit" },
                        if tls { "TLS" } else { "plain" }
                    );
                }
            }
        }
    }
    let rows: Vec<Row> = LOADS
        .iter()
        .enumerate()
        .map(|(l, load)| {
            let f = &figures[l];
            let ratios = |a: &[f64], b: &[f64]| -> Vec<f64> {
                a.iter().zip(b).map(|(x, y)| x / y).collect()
            };
            let mut tls_rounds = ratios(&f[0], &f[2]);
            tls_rounds.sort_by(|a, b| a.total_cmp(b));
            Row {
                load: load.name,
                unit: if load.request_bytes >= 1 << 20 {
                    "MB/s"
                } else {
                    "requests/s"
                },
                volume_tls: median(f[0].clone()),
                volume_plain: median(f[1].clone()),
                nbdkit_tls: median(f[2].clone()),
                nbdkit_plain: median(f[3].clone()),
                ratio_tls: median(tls_rounds.clone()),
                ratio_plain: median(ratios(&f[1], &f[3])),
                volume_tls_over_plain: median(ratios(&f[0], &f[1])),
                nbdkit_tls_over_plain: median(ratios(&f[2], &f[3])),
                ratio_tls_rounds: tls_rounds,
                pinned: crate::cpus::pinned(),
            }
        })
        .collect();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "NBD with TLS (pre-shared key) and without: volume serve against nbdkit file, nbdcopy as the client, {} MiB per load, median of {} round(s); {}",
        region >> 20,
        a.repeat,
        if crate::cpus::pinned() {
            "servers on CPU 1, nbdcopy on CPU 0"
        } else {
            "nbdcopy and the servers where the scheduler puts them"
        }
    );
    println!(
        "{:<9} {:>11} {:>11} {:>7} {:>11} {:>11} {:>7} {:>9} {:>9}  unit",
        "load",
        "ours TLS",
        "nbdkit TLS",
        "ratio",
        "ours plain",
        "nbdkit pl.",
        "ratio",
        "ours T/P",
        "nbdkit T/P"
    );
    for r in &rows {
        println!(
            "{:<9} {:>11.1} {:>11.1} {:>7.2} {:>11.1} {:>11.1} {:>7.2} {:>9.2} {:>9.2}  {}",
            r.load,
            r.volume_tls,
            r.nbdkit_tls,
            r.ratio_tls,
            r.volume_plain,
            r.nbdkit_plain,
            r.ratio_plain,
            r.volume_tls_over_plain,
            r.nbdkit_tls_over_plain,
            r.unit
        );
    }
    Ok(())
}
