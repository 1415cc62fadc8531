//! `cordillera volume pgbench`: PostgreSQL's pgbench on ext4 on the off-loading volume, the
//! base volume and one idle store each emulating `cheetah-15k`, transactions per second with
//! off-load ÷ without, measured in the same run.
//!
//! The stack, per configuration, from fresh files: `store serve --emulate` and `volume serve
//! --emulate` (one of `--policy baseline`, the peak policy with `--t-base`, `--policy always`),
//! `nbdfuse` exposing the export as a file, `losetup --direct-io=on` (so the loop device keeps
//! several requests in flight and adds no page cache of its own), `mkfs.ext4`, `mount`, then
//! `initdb`, `pg_ctl start`, `pgbench -i` and a timed `pgbench` run as the `postgres` user. The
//! database runs with small shared buffers and frequent checkpoints so that the disk, not the
//! two CPUs, limits it. Needs root (loop devices and mounts), FUSE, and PostgreSQL's binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use cordillera_procs::nbd_loop::NbdLoop;
use serde::Serialize;

use crate::volume_bench::{median, offloaded_fraction, work_dir, Setup};

#[derive(Args)]
pub struct PgbenchArgs {
    /// Directory for the base volumes, stores and mount points (created; files removed after).
    /// Default: a fresh directory in /dev/shm when it has 8 GiB free (so that only the
    /// emulated devices' timing counts, not the host disk's flushes), else in /var/tmp.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seconds of each timed pgbench run.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Rounds of the three configurations; figures are medians, ratios the median of the
    /// rounds' ratios.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// pgbench scale factor (about 15 MB per unit).
    #[arg(long, default_value_t = 10)]
    scale: u32,
    /// pgbench clients.
    #[arg(long, default_value_t = 8)]
    clients: u32,
    /// T_base of the peak-policy configuration (0: off-load whenever the base volume is busy;
    /// writes reach it one at a time through FUSE, so its queue rarely grows past 1).
    #[arg(long, default_value_t = 0)]
    t_base: u64,
    /// Bytes of the base volume.
    #[arg(long, default_value = "4g")]
    size: String,
    /// PostgreSQL's binaries (default: the newest /usr/lib/postgresql/*/bin).
    #[arg(long)]
    pg_bin: Option<PathBuf>,
    /// Record each configuration's volume as a trace in this folder (`volume serve
    /// --record-trace`): `no-off-load-1.cdt`, … per configuration and round, finished by a
    /// clean stop of the volume server; `cordillera advise` judges them.
    #[arg(long)]
    record_trace: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Case {
    name: &'static str,
    tps: f64,
    latency_ms: f64,
    offloaded_write_fraction: f64,
}

#[derive(Serialize)]
struct PgFigures {
    scale: u32,
    clients: u32,
    seconds: u64,
    rounds: usize,
    cases: Vec<Case>,
    /// Medians of the rounds' ratios (each round's configurations run back to back).
    peak_ratio: f64,
    always_ratio: f64,
    rounds_peak_ratio: Vec<f64>,
    rounds_always_ratio: Vec<f64>,
}

pub(crate) fn pg_bin(given: &Option<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.clone());
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .context("PostgreSQL is not installed (apt-get install postgresql)")?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("pgbench").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| anyhow!("no /usr/lib/postgresql/*/bin/pgbench"))
}

/// Stops a recording volume server cleanly (its trace finished), or says why not.
fn stop_recorded(
    volume: &mut cordillera_procs::process::Proc,
    name: &str,
    path: &Path,
) -> Result<()> {
    let clean = volume
        .terminate(std::time::Duration::from_secs(60))
        .map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        clean,
        "the volume server did not stop cleanly: {}",
        volume.log()
    );
    eprintln!("volume pgbench: {name}: recorded {}", path.display());
    Ok(())
}

/// Runs a command, failing with its output.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("{program} {args:?} failed: {}", text.trim());
    }
    Ok(text)
}

/// Runs a PostgreSQL binary as the `postgres` user.
pub(crate) fn as_postgres(bin: &Path, program: &str, args: &[&str]) -> Result<String> {
    let path = bin.join(program);
    let mut full = vec!["-u", "postgres", "--", path.to_str().expect("UTF-8 path")];
    full.extend_from_slice(args);
    run("runuser", &full)
}

/// Everything mounted and started for one configuration, torn down in reverse when dropped
/// (PostgreSQL first, then the file system, the loop device and nbdfuse).
pub(crate) struct Stack {
    data_dir: PathBuf,
    pg_bin: PathBuf,
    postgres: bool,
    disk: NbdLoop,
}

impl Stack {
    pub(crate) fn attach(uri: &str, dir: &Path, pg_bin: &Path) -> Result<Stack> {
        // Direct I/O: the loop device keeps no page cache of its own over the export.
        let mut disk = NbdLoop::attach(uri, dir, true).map_err(anyhow::Error::msg)?;
        disk.mkfs_ext4().map_err(anyhow::Error::msg)?;
        disk.mount().map_err(anyhow::Error::msg)?;
        run(
            "chown",
            &["postgres", disk.mount_dir().to_str().expect("UTF-8")],
        )?;
        Ok(Stack {
            data_dir: disk.mount_dir().join("pgdata"),
            pg_bin: pg_bin.to_owned(),
            postgres: false,
            disk,
        })
    }

    pub(crate) fn start_postgres(&mut self, socket_dir: &Path, port: u16) -> Result<()> {
        let data = self.data_dir.to_str().expect("UTF-8").to_owned();
        as_postgres(&self.pg_bin, "initdb", &["-D", &data, "--no-sync"])?;
        let log = self.disk.mount_dir().join("postgres.log");
        let options = format!(
            "-p {port} -k {} -c listen_addresses='' -c shared_buffers=16MB \
             -c max_wal_size=64MB -c checkpoint_timeout=30s",
            socket_dir.display()
        );
        as_postgres(
            &self.pg_bin,
            "pg_ctl",
            &[
                "-D",
                &data,
                "-o",
                &options,
                "-w",
                "-l",
                log.to_str().expect("UTF-8"),
                "start",
            ],
        )?;
        self.postgres = true;
        Ok(())
    }
}

impl Stack {
    /// Stops PostgreSQL cleanly, unmounts, and checks the file system read-only
    /// (`e2fsck -fn`): its report, or an error if it found anything to fix.
    pub(crate) fn stop_and_check(&mut self) -> Result<String> {
        if self.postgres {
            let data = self.data_dir.to_str().expect("UTF-8").to_owned();
            as_postgres(
                &self.pg_bin,
                "pg_ctl",
                &["-D", &data, "-m", "fast", "-w", "stop"],
            )?;
            self.postgres = false;
        }
        self.disk.unmount().map_err(anyhow::Error::msg)?;
        run("e2fsck", &["-fn", self.disk.device()])
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if self.postgres {
            let data = self.data_dir.to_str().expect("UTF-8").to_owned();
            let _ = as_postgres(
                &self.pg_bin,
                "pg_ctl",
                &["-D", &data, "-m", "immediate", "-w", "stop"],
            );
        }
        // Then `disk` is dropped: unmounted, detached.
    }
}

/// Where the files go by default: memory (`/dev/shm`) when it has room, so that the timing is
/// the emulated devices' alone. The emulator adds the model's time to each request but a flush
/// is still a real `fdatasync`, and on a disk-backed file system that real flush — paid by
/// every durable store append and by every flush of the base — is the host disk's latency,
/// not the model's (on this project's test machine it cut the off-loading configurations'
/// throughput by a quarter and made the baseline's vary by a fifth between runs).
pub(crate) fn default_parent() -> &'static Path {
    const ROOM_BYTES: u64 = 8 << 30;
    let shm = Path::new("/dev/shm");
    if crate::volume_bench::free_bytes(shm).is_some_and(|free| free >= ROOM_BYTES) {
        shm
    } else {
        Path::new("/var/tmp")
    }
}

/// `tps = 374.1 (without initial connection time)` and `latency average = 10.69 ms`.
pub(crate) fn parse_pgbench(text: &str) -> Result<(f64, f64)> {
    let number_after = |key: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].split_whitespace().next()?.parse().ok()
    };
    let tps = number_after("tps = ").ok_or_else(|| anyhow!("no tps in pgbench's output"))?;
    let latency = number_after("latency average = ").unwrap_or(f64::NAN);
    Ok((tps, latency))
}

pub fn run_pgbench(a: PgbenchArgs) -> Result<()> {
    if run("id", &["-u"])?.trim() != "0" {
        bail!("volume pgbench needs root (loop devices and mounts)");
    }
    let pg_bin = pg_bin(&a.pg_bin)?;
    let size = cordillera_models::presets::parse_size(&a.size).map_err(anyhow::Error::msg)?;
    let (dir, _scratch) = work_dir(&a.dir, default_parent(), "cordillera-pgbench")?;
    eprintln!("volume pgbench: files in {}", dir.display());
    if let Some(d) = &a.record_trace {
        std::fs::create_dir_all(d)
            .with_context(|| format!("--record-trace {}: creating it", d.display()))?;
    }
    let socket_dir = dir.join("socket");
    std::fs::create_dir_all(&socket_dir)?;
    run("chmod", &["777", socket_dir.to_str().expect("UTF-8")])?;
    let setup = Setup {
        me: crate::this_program()?,
        dir: &dir,
        region: size,
    };
    let t_base = a.t_base.to_string();
    let configurations: [(&'static str, Vec<&str>); 3] = [
        ("no off-load", vec!["--policy", "baseline"]),
        ("peak off-load", vec!["--t-base", &t_base]),
        ("always off-load", vec!["--policy", "always"]),
    ];
    let rounds = a.repeat.max(1);
    // Per configuration, each round's (tps, latency, off-loaded fraction).
    let mut measured: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); configurations.len()];
    for round in 0..rounds {
        for (index, (name, flags)) in configurations.iter().enumerate() {
            let name = *name;
            eprintln!(
            "volume pgbench: round {}/{rounds}: {name}: initializing scale {} on emulated cheetah-15k",
            round + 1,
            a.scale
        );
            let recording = a
                .record_trace
                .as_ref()
                .map(|d| d.join(format!("{}-{}.cdt", name.replace(' ', "-"), round + 1)));
            let mut flags = flags.clone();
            if let Some(path) = &recording {
                flags.extend(["--record-trace", path.to_str().expect("UTF-8")]);
            }
            let (mut procs, uri, metrics) = setup.volume("pgbench", &flags, true)?;
            let mut stack = Stack::attach(&uri, &dir, &pg_bin)?;
            let port = crate::volume_bench::free_port()?;
            stack.start_postgres(&socket_dir, port)?;
            let host = socket_dir.to_str().expect("UTF-8").to_owned();
            let port = port.to_string();
            let scale = a.scale.to_string();
            as_postgres(
                &pg_bin,
                "pgbench",
                &[
                    "-h", &host, "-p", &port, "-i", "-q", "-s", &scale, "postgres",
                ],
            )?;
            eprintln!(
                "volume pgbench: {name}: {} clients for {} s",
                a.clients, a.seconds
            );
            let clients = a.clients.to_string();
            let seconds = a.seconds.to_string();
            let out = as_postgres(
                &pg_bin,
                "pgbench",
                &[
                    "-h", &host, "-p", &port, "-c", &clients, "-j", "2", "-T", &seconds, "postgres",
                ],
            )?;
            let (tps, latency_ms) = parse_pgbench(&out)?;
            measured[index].push((tps, latency_ms, offloaded_fraction(&metrics)?));
            if let Some(path) = &recording {
                // The file system down first, so that the recorded trace is finished whole.
                drop(stack);
                stop_recorded(&mut procs[0], name, path)?;
            }
        }
    }
    for name in ["pgbench.base", "pgbench.store"] {
        let _ = std::fs::remove_file(dir.join(name));
    }
    let column = |i: usize, pick: fn(&(f64, f64, f64)) -> f64| -> Vec<f64> {
        measured[i].iter().map(pick).collect()
    };
    let cases: Vec<Case> = configurations
        .iter()
        .enumerate()
        .map(|(i, (name, _))| Case {
            name,
            tps: median(column(i, |m| m.0)),
            latency_ms: median(column(i, |m| m.1)),
            offloaded_write_fraction: median(column(i, |m| m.2)),
        })
        .collect();
    let ratios = |i: usize| -> Vec<f64> {
        measured[i]
            .iter()
            .zip(&measured[0])
            .map(|(m, base)| m.0 / base.0)
            .collect()
    };
    let figures = PgFigures {
        scale: a.scale,
        clients: a.clients,
        seconds: a.seconds,
        rounds,
        peak_ratio: median(ratios(1)),
        always_ratio: median(ratios(2)),
        rounds_peak_ratio: ratios(1),
        rounds_always_ratio: ratios(2),
        cases,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
        return Ok(());
    }
    println!(
        "volume pgbench: scale {}, {} clients, {} s, {} round(s) (medians), ext4 on nbdfuse + loop, base and store emulating cheetah-15k",
        figures.scale, figures.clients, figures.seconds, figures.rounds
    );
    for c in &figures.cases {
        println!(
            "  {:<16} {:>8.1} TPS   latency {:>7.2} ms   {:>3.0} % of writes off-loaded",
            c.name,
            c.tps,
            c.latency_ms,
            100.0 * c.offloaded_write_fraction
        );
    }
    let each = |r: &[f64]| {
        r.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "  ratio to no off-load: peak (T_base {}) {:.2} (rounds {}), always {:.2} (rounds {}) (target ≥ 2)",
        a.t_base,
        figures.peak_ratio,
        each(&figures.rounds_peak_ratio),
        figures.always_ratio,
        each(&figures.rounds_always_ratio)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgbench_output_is_parsed() {
        let text = "number of failed transactions: 0 (0.000%)\nlatency average = 10.692 ms\n\
                    initial connection time = 6.052 ms\ntps = 374.104609 (without initial connection time)\n";
        assert_eq!(parse_pgbench(text).unwrap(), (374.104609, 10.692));
        assert!(parse_pgbench("pgbench: error: connection refused").is_err());
    }
}
