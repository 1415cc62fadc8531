//! `cordillera volume bench`: the off-loading volume server against `nbdkit file` and against
//! itself without off-load, driven by fio's NBD engine, every figure measured in the same run:
//!
//! 1. no emulation, off-load idle (peak policy, one store, nothing off-loaded at depth 32 with
//!    T_base = 32): 4 KiB random writes at depth 32, IOPS ÷ `nbdkit file` on the same file;
//! 2. the same, 1 MiB sequential writes at depth 8, bandwidth ÷ nbdkit;
//! 3. base volume and one idle store each emulating `cheetah-15k` (`--emulate`): 64 KiB random
//!    writes at depth 32, throughput with peak off-load (T_base as `--t-base`) ÷ the same volume
//!    with `--policy baseline` (Everest §4.3 reports about 3× for OLTP with one idle store).
//!
//! Each volume case starts from fresh files, so that nothing off-loaded by one is reclaimed
//! during another. Before every fio run the page cache's dirty data is written back (`sync`),
//! so that no run pays for the previous one's writeback, and in the comparisons with nbdkit
//! the server that goes first alternates from round to round. Figures are medians of
//! `--repeat` rounds; each ratio is the median of the rounds' ratios (the two runs of a round
//! are measured back to back, so a slow spell of a shared machine weighs on both).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::Serialize;

#[derive(Args)]
pub struct VolumeBenchArgs {
    /// Directory for the base volumes and stores (created and removed there).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seconds of each fio run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Rounds of every measurement; the figures are medians.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Bytes of the region written (of the base volume).
    #[arg(long, default_value = "1g")]
    region: String,
    /// T_base of the emulated case.
    #[arg(long, default_value_t = 4)]
    t_base: u64,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Default)]
struct Figures {
    randwrite_4k_iops_volume: f64,
    randwrite_4k_iops_nbdkit: f64,
    randwrite_4k_ratio: f64,
    seqwrite_1m_mb_per_s_volume: f64,
    seqwrite_1m_mb_per_s_nbdkit: f64,
    seqwrite_1m_ratio: f64,
    emulated_randwrite_64k_iops_offload: f64,
    emulated_randwrite_64k_iops_baseline: f64,
    emulated_randwrite_64k_ratio: f64,
    emulated_offloaded_write_fraction: f64,
    /// Each round's ratio (volume ÷ nbdkit, off-load ÷ none), for the spread behind the medians.
    rounds_4k_ratio: Vec<f64>,
    rounds_1m_ratio: Vec<f64>,
    rounds_emulated_ratio: Vec<f64>,
}

fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}

fn spread(ratios: &[f64]) -> String {
    let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    format!("rounds {}", each.join(" "))
}

/// A child process killed when dropped.
pub(crate) struct Proc(Child);

impl Proc {
    /// SIGTERM, then waits up to `limit` for the exit; whether it exited successfully.
    pub(crate) fn terminate(&mut self, limit: Duration) -> Result<bool> {
        let pid = self.0.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.0.try_wait()? {
                return Ok(status.success());
            }
            if std::time::Instant::now() > deadline {
                bail!("process {pid} did not exit within {limit:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `program args…` and waits for each line starting with one of `wanted` on its standard
/// error; returns the rest of each.
pub(crate) fn spawn_until(
    program: &Path,
    args: &[String],
    wanted: &[&str],
) -> Result<(Proc, Vec<String>)> {
    let mut child = Command::new(program)
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", program.display()))?;
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let proc = Proc(child);
    let mut found = Vec::new();
    let mut seen = Vec::new();
    for prefix in wanted {
        loop {
            let Some(Ok(line)) = lines.next() else {
                bail!(
                    "{} {args:?} stopped before {prefix:?}:\n{}",
                    program.display(),
                    seen.join("\n")
                );
            };
            if let Some(rest) = line.strip_prefix(prefix) {
                found.push(rest.to_string());
                break;
            }
            seen.push(line);
        }
    }
    std::thread::spawn(move || for _ in lines {});
    Ok((proc, found))
}

pub(crate) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

struct Fio {
    iops: f64,
    bytes_per_s: f64,
}

fn fio(uri: &str, rw: &str, bs: &str, depth: u32, seconds: u64, region: u64) -> Result<Fio> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let out = Command::new("fio")
        .args([
            "--name=bench",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            &format!("--rw={rw}"),
            &format!("--bs={bs}"),
            &format!("--iodepth={depth}"),
            &format!("--size={region}"),
            &format!("--runtime={seconds}"),
            "--time_based",
            "--ramp_time=1",
            "--output-format=json",
        ])
        .output()
        .context("cannot run fio (install it: apt-get install fio)")?;
    if !out.status.success() {
        bail!("fio failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON document.
    let json = &text[text.find('{').ok_or_else(|| anyhow!("no JSON from fio"))?..];
    let v: serde_json::Value = serde_json::from_str(json).context("fio's JSON")?;
    let w = &v["jobs"][0]["write"];
    Ok(Fio {
        iops: w["iops"].as_f64().unwrap_or(0.0),
        bytes_per_s: w["bw_bytes"].as_f64().unwrap_or(0.0),
    })
}

pub(crate) struct Setup<'a> {
    pub me: PathBuf,
    pub dir: &'a Path,
    pub region: u64,
}

impl Setup<'_> {
    pub(crate) fn base(&self, name: &str) -> Result<PathBuf> {
        let path = self.dir.join(name);
        let _ = std::fs::remove_file(&path);
        std::fs::File::create(&path)?.set_len(self.region + (64 << 10))?;
        Ok(path)
    }

    fn store(&self, name: &str, emulate: bool) -> Result<(Proc, String)> {
        let path = self.dir.join(name);
        let _ = std::fs::remove_file(&path);
        let mut args: Vec<String> = [
            "store",
            "serve",
            "--size",
            "2g",
            "--sparse",
            "--io",
            "buffered",
            "--listen",
            "127.0.0.1:0",
            "--path",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(path.to_string_lossy().into());
        if emulate {
            args.extend(["--emulate".into(), "cheetah-15k".into()]);
        }
        let (p, found) = spawn_until(&self.me, &args, &["cordillera store: listening on "])?;
        Ok((p, found[0].clone()))
    }

    /// A freshly formatted volume with one store; returns (processes, NBD URI, metrics addr).
    pub(crate) fn volume(
        &self,
        name: &str,
        extra: &[&str],
        emulate: bool,
    ) -> Result<(Vec<Proc>, String, String)> {
        let (store, store_addr) = self.store(&format!("{name}.store"), emulate)?;
        let base = self.base(&format!("{name}.base"))?;
        let mut args: Vec<String> = [
            "volume",
            "serve",
            "--format",
            "--nbd",
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
            "--store",
            &store_addr,
            "--base",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(base.to_string_lossy().into());
        args.extend(extra.iter().map(|s| s.to_string()));
        if emulate {
            args.extend(["--emulate".into(), "cheetah-15k".into()]);
        }
        let (v, found) = spawn_until(
            &self.me,
            &args,
            &[
                "cordillera volume: NBD export at ",
                "cordillera volume: metrics at http://",
            ],
        )?;
        let metrics = found[1].trim_end_matches("/metrics").to_string();
        Ok((vec![v, store], found[0].clone(), metrics))
    }

    fn nbdkit(&self, name: &str) -> Result<(Proc, String)> {
        let base = self.base(name)?;
        let port = free_port()?;
        let child = Command::new("nbdkit")
            .args([
                "--foreground",
                "--exit-with-parent",
                "--port",
                &port.to_string(),
                "file",
            ])
            .arg(&base)
            .stderr(Stdio::null())
            .spawn()
            .context("cannot run nbdkit (install it: apt-get install nbdkit)")?;
        let proc = Proc(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok((proc, format!("nbd://127.0.0.1:{port}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("nbdkit did not start listening on {port}")
    }
}

/// The benchmark's directory: `given` (created if missing), else a fresh one under `parent`,
/// removed when the returned guard drops.
pub(crate) fn work_dir(
    given: &Option<PathBuf>,
    parent: &Path,
    prefix: &str,
) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    if let Some(d) = given {
        std::fs::create_dir_all(d)?;
        return Ok((d.clone(), None));
    }
    let scratch = tempfile::Builder::new().prefix(prefix).tempdir_in(parent)?;
    Ok((scratch.path().to_path_buf(), Some(scratch)))
}

pub(crate) fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

pub(crate) fn offloaded_fraction(metrics: &str) -> Result<f64> {
    let addr = metrics.parse().context("metrics address")?;
    let v: serde_json::Value =
        serde_json::from_str(&crate::volume_cmd::http_get(addr, "/status")?)?;
    let off = v["offloaded_writes"].as_f64().unwrap_or(0.0);
    let base = v["base_writes"].as_f64().unwrap_or(0.0);
    Ok(if off + base > 0.0 {
        off / (off + base)
    } else {
        0.0
    })
}

pub fn run(a: VolumeBenchArgs) -> Result<()> {
    let region = cordillera_sim::presets::parse_size(&a.region).map_err(anyhow::Error::msg)?;
    let (dir, _scratch) = work_dir(&a.dir, &std::env::temp_dir(), "cordillera-volume-bench")?;
    let setup = Setup {
        me: std::env::current_exe()?,
        dir: &dir,
        region,
    };
    let s = a.seconds.max(2);
    let rounds = a.repeat.max(1);
    let mut v4k = Vec::new();
    let mut k4k = Vec::new();
    let mut v1m = Vec::new();
    let mut k1m = Vec::new();
    let mut e_off = Vec::new();
    let mut e_base = Vec::new();
    let mut fraction = Vec::new();
    for round in 0..rounds {
        eprintln!(
            "volume bench: round {}/{rounds}: 4 KiB random writes, depth 32",
            round + 1
        );
        let nbdkit_first = round % 2 == 0;
        for nbdkit in [nbdkit_first, !nbdkit_first] {
            if nbdkit {
                let (_k, uri) = setup.nbdkit("nbdkit.base")?;
                k4k.push(fio(&uri, "randwrite", "4k", 32, s, region)?.iops);
            } else {
                let (_v, uri, _) = setup.volume("plain", &[], false)?;
                v4k.push(fio(&uri, "randwrite", "4k", 32, s, region)?.iops);
            }
        }
        eprintln!(
            "volume bench: round {}/{rounds}: 1 MiB sequential writes, depth 8",
            round + 1
        );
        for nbdkit in [nbdkit_first, !nbdkit_first] {
            if nbdkit {
                let (_k, uri) = setup.nbdkit("nbdkit.base")?;
                k1m.push(fio(&uri, "write", "1m", 8, s, region)?.bytes_per_s / 1e6);
            } else {
                let (_v, uri, _) = setup.volume("plain", &[], false)?;
                v1m.push(fio(&uri, "write", "1m", 8, s, region)?.bytes_per_s / 1e6);
            }
        }
        eprintln!(
            "volume bench: round {}/{rounds}: emulated cheetah-15k, 64 KiB random writes, depth 32",
            round + 1
        );
        {
            let t_base = a.t_base.to_string();
            let (_v, uri, metrics) = setup.volume("emulated", &["--t-base", &t_base], true)?;
            e_off.push(fio(&uri, "randwrite", "64k", 32, s, region)?.iops);
            fraction.push(offloaded_fraction(&metrics)?);
        }
        {
            let (_v, uri, _) = setup.volume("emulated", &["--policy", "baseline"], true)?;
            e_base.push(fio(&uri, "randwrite", "64k", 32, s, region)?.iops);
        }
    }
    for name in [
        "nbdkit.base",
        "plain.base",
        "plain.store",
        "emulated.base",
        "emulated.store",
    ] {
        let _ = std::fs::remove_file(dir.join(name));
    }
    let mut f = Figures {
        rounds_4k_ratio: ratios(&v4k, &k4k),
        rounds_1m_ratio: ratios(&v1m, &k1m),
        rounds_emulated_ratio: ratios(&e_off, &e_base),
        randwrite_4k_iops_volume: median(v4k),
        randwrite_4k_iops_nbdkit: median(k4k),
        seqwrite_1m_mb_per_s_volume: median(v1m),
        seqwrite_1m_mb_per_s_nbdkit: median(k1m),
        emulated_randwrite_64k_iops_offload: median(e_off),
        emulated_randwrite_64k_iops_baseline: median(e_base),
        emulated_offloaded_write_fraction: median(fraction),
        ..Figures::default()
    };
    // The ratio is the median of each round's ratio: the two runs of a round are measured
    // back to back, so a slow spell of the machine weighs on both.
    f.randwrite_4k_ratio = median(f.rounds_4k_ratio.clone());
    f.seqwrite_1m_ratio = median(f.rounds_1m_ratio.clone());
    f.emulated_randwrite_64k_ratio = median(f.rounds_emulated_ratio.clone());
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
        return Ok(());
    }
    println!(
        "volume bench: {s} s per run, {rounds} round(s); figures are medians, ratios the median of the rounds' ratios; region {region} bytes"
    );
    println!(
        "  4 KiB random write, depth 32:   volume {:>9.0} IOPS   nbdkit file {:>9.0} IOPS   ratio {:.2} (target ≥ 1.0; {})",
        f.randwrite_4k_iops_volume,
        f.randwrite_4k_iops_nbdkit,
        f.randwrite_4k_ratio,
        spread(&f.rounds_4k_ratio)
    );
    println!(
        "  1 MiB sequential write, depth 8: volume {:>9.0} MB/s   nbdkit file {:>9.0} MB/s   ratio {:.2} (target ≥ 0.9; {})",
        f.seqwrite_1m_mb_per_s_volume,
        f.seqwrite_1m_mb_per_s_nbdkit,
        f.seqwrite_1m_ratio,
        spread(&f.rounds_1m_ratio)
    );
    println!(
        "  emulated cheetah-15k, 64 KiB random write, depth 32: off-load {:>6.0} IOPS ({:.0} % of writes off-loaded)   no off-load {:>6.0} IOPS   ratio {:.2} (target ≥ 2.5; {})",
        f.emulated_randwrite_64k_iops_offload,
        f.emulated_offloaded_write_fraction * 100.0,
        f.emulated_randwrite_64k_iops_baseline,
        f.emulated_randwrite_64k_ratio,
        spread(&f.rounds_emulated_ratio)
    );
    Ok(())
}
