//! `cordillera cluster pgbench`: PostgreSQL's pgbench on ext4 on an object of a local Sierra
//! cluster (real processes), while the gears shift down and up: pgbench must finish without an
//! error, and the file system must check clean (`e2fsck -fn`) afterwards.
//!
//! The stack: `cluster up`'s daemons, `volume serve --cluster`, `nbdfuse`, `losetup
//! --direct-io=on`, `mkfs.ext4`, `mount`, `initdb`, `pg_ctl start`, `pgbench -i`, then a timed
//! `pgbench` run during which the gear goes 3 → 1 at a third of the run and 1 → 3 at two
//! thirds. Needs root (loop devices and mounts), FUSE, and PostgreSQL's binaries.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use cordillera_procs::cluster::{ClusterOptions, Daemon, LocalCluster};

use crate::volume_pgbench::{as_postgres, default_parent, parse_pgbench, pg_bin, run, Stack};

#[derive(Args)]
pub struct ClusterPgbenchArgs {
    /// Directory for the cluster, mount points and sockets (default: a fresh one, removed
    /// after).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seconds of the timed pgbench run (the gear goes down at a third, up at two thirds).
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// pgbench scale factor (about 15 MB per unit).
    #[arg(long, default_value_t = 4)]
    scale: u32,
    #[arg(long, default_value_t = 4)]
    clients: u32,
    /// Disk model of the chunk servers and loggers (none: this machine's disk).
    #[arg(long)]
    emulate: Option<String>,
    /// PostgreSQL's binaries (default: the newest /usr/lib/postgresql/*/bin).
    #[arg(long)]
    pg_bin: Option<PathBuf>,
}

pub fn run_cluster_pgbench(a: ClusterPgbenchArgs) -> Result<()> {
    if run("id", &["-u"])?.trim() != "0" {
        bail!("cluster pgbench needs root (loop devices and mounts)");
    }
    let pg_bin = pg_bin(&a.pg_bin)?;
    let (dir, _scratch) =
        crate::volume_bench::work_dir(&a.dir, default_parent(), "cordillera-cluster-pgbench")?;
    eprintln!("cluster pgbench: files in {}", dir.display());
    let me = crate::this_program()?;
    let options = ClusterOptions {
        emulate: a.emulate.clone(),
        wake_seconds: 0.5,
        logger_size: "512m".into(),
        ..ClusterOptions::default()
    };
    let cluster =
        LocalCluster::start(&me, &dir.join("cluster"), options).map_err(anyhow::Error::msg)?;
    let (_volume, url) = cluster
        .start_volume("pgbench", "1g", &[])
        .map_err(anyhow::Error::msg)?;
    let socket_dir = dir.join("socket");
    std::fs::create_dir_all(&socket_dir)?;
    run("chmod", &["777", socket_dir.to_str().expect("UTF-8")])?;
    let mut stack = Stack::attach(&url, &dir, &pg_bin)?;
    let port = crate::volume_bench::free_port()?;
    stack.start_postgres(&socket_dir, port)?;
    let host = socket_dir.to_str().expect("UTF-8").to_owned();
    let port = port.to_string();
    let scale = a.scale.to_string();
    eprintln!("cluster pgbench: initializing scale {}", a.scale);
    as_postgres(
        &pg_bin,
        "pgbench",
        &[
            "-h", &host, "-p", &port, "-i", "-q", "-s", &scale, "postgres",
        ],
    )?;
    eprintln!(
        "cluster pgbench: {} clients for {} s; gear 1 at {} s, gear 3 at {} s",
        a.clients,
        a.seconds,
        a.seconds / 3,
        2 * a.seconds / 3
    );
    let shifter = {
        let (me, mds, seconds) = (me.clone(), cluster.mds_addr(), a.seconds);
        std::thread::spawn(move || -> Result<Vec<(f64, String)>> {
            let start = Instant::now();
            let mut shifts = Vec::new();
            for (at, gear) in [(seconds / 3, "1"), (2 * seconds / 3, "3")] {
                let wait = Duration::from_secs(at).saturating_sub(start.elapsed());
                std::thread::sleep(wait);
                run(
                    me.to_str().expect("UTF-8"),
                    &["cluster", "gear", gear, "--mds", &mds],
                )?;
                shifts.push((start.elapsed().as_secs_f64(), gear.to_string()));
            }
            Ok(shifts)
        })
    };
    let clients = a.clients.to_string();
    let seconds = a.seconds.to_string();
    let out = as_postgres(
        &pg_bin,
        "pgbench",
        &[
            "-h", &host, "-p", &port, "-c", &clients, "-j", "2", "-T", &seconds, "postgres",
        ],
    )?;
    let shifts = shifter.join().expect("the gear thread")?;
    let (tps, latency_ms) = parse_pgbench(&out)?;
    let failed = out
        .lines()
        .find(|l| l.contains("number of failed transactions"))
        .map(str::to_string);
    if let Some(f) = &failed {
        if !f.contains(": 0 ") {
            bail!("pgbench reports failed transactions: {f}");
        }
    }
    let mds = cluster.status(Daemon::Mds).map_err(anyhow::Error::msg)?;
    let fsck = stack.stop_and_check()?;
    println!(
        "cluster pgbench: scale {}, {} clients, {} s: {tps:.1} tps, {latency_ms:.2} ms mean latency, {}",
        a.scale,
        a.clients,
        a.seconds,
        failed.as_deref().map_or("no failed-transaction count printed".into(), |f| f.trim().to_string())
    );
    for (at, gear) in &shifts {
        println!("cluster pgbench: gear {gear} at {at:.1} s");
    }
    println!(
        "cluster pgbench: {} standbys, {} wakes, {} migrations; e2fsck -fn: clean ({})",
        mds["stats"]["standbys"],
        mds["stats"]["wakes"],
        mds["stats"]["migrations"],
        fsck.lines()
            .find(|l| l.contains(" files, "))
            .unwrap_or("")
            .trim()
    );
    Ok(())
}
