//! What the Sierra cluster tests share: the binary, a local cluster with fast wake-ups, an
//! object exported over NBD, qemu-io commands, and waiting for the cluster to be quiet.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cordillera_testkit::cluster::{ClusterOptions, Daemon, LocalCluster};
use cordillera_testkit::process::{Bounded, Proc, COMMAND_LIMIT};

pub fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_cordillera"))
}

pub fn start_cluster(dir: &Path) -> LocalCluster {
    let options = ClusterOptions {
        wake_seconds: 0.5,
        logger_size: "256m".into(),
        ..ClusterOptions::default()
    };
    LocalCluster::start(binary(), dir, options).unwrap_or_else(|e| panic!("{e}"))
}

/// `volume serve --cluster` for `object`; its NBD URL.
pub fn start_volume(c: &LocalCluster, object: &str, size: &str) -> (Proc, String) {
    c.start_volume(object, size, &[])
        .unwrap_or_else(|e| panic!("{e}"))
}

/// qemu-io commands on an export; `Err` with its output unless every one succeeded.
pub fn qemu(url: &str, commands: &[&str]) -> Result<(), String> {
    let mut args = vec!["-f".to_string(), "raw".into()];
    for c in commands {
        args.extend(["-c".into(), c.to_string()]);
    }
    args.push(url.into());
    let out = Command::new("qemu-io")
        .args(&args)
        .output_within(COMMAND_LIMIT)
        .map_err(|e| e.to_string())?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success()
        || text.contains("Pattern verification failed")
        || text.contains("failed:")
    {
        return Err(format!("qemu-io {commands:?}:\n{text}"));
    }
    Ok(())
}

/// Waits until every server is up in the top gear and no server holds logged bytes.
pub fn wait_quiet(c: &LocalCluster, limit: Duration) -> serde_json::Value {
    let deadline = Instant::now() + limit;
    loop {
        let mds = c.status(Daemon::Mds).unwrap_or_else(|e| panic!("{e}"));
        let all_up = mds["servers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["state"] == "up");
        let logged: u64 = (0..c.servers())
            .map(|s| {
                c.status(Daemon::Server(s)).map_or(u64::MAX, |st| {
                    st["logged_bytes"].as_u64().unwrap_or(u64::MAX)
                })
            })
            .sum();
        if all_up && logged == 0 && mds["groups_without_primary"] == 0 {
            return mds;
        }
        assert!(
            Instant::now() < deadline,
            "not quiet after {limit:?}: logged {logged}, MDS {mds}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The servers awake in gear 1 (one rack), for the groups they hold.
pub fn awake_servers(c: &LocalCluster) -> Vec<(u32, u64)> {
    let mds = c.status(Daemon::Mds).unwrap();
    mds["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["state"] == "up")
        .map(|s| {
            (
                s["id"].as_u64().unwrap() as u32,
                s["primaries"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Waits until only one rack's servers are up (gear 1 reached).
pub fn wait_gear_1(c: &LocalCluster) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while awake_servers(c).len() != c.options.per_rack as usize {
        assert!(Instant::now() < deadline, "gear 1 not reached");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// fio's random 4–64 KiB writes over the 64 MiB object for `seconds`, then every block it wrote
/// verified; its output.
pub fn random_writes_verified(url: &str, seconds: u32) -> String {
    cordillera_testkit::process::fio_verify(
        url,
        &[
            "--rw=randwrite",
            "--bsrange=4k-64k",
            "--size=64m",
            "--time_based",
            &format!("--runtime={seconds}"),
            "--do_verify=1",
        ],
    )
}

/// The last `lines` lines each daemon of the cluster and the volume wrote,
/// headed by who wrote them: what a failing test prints so that a run on CI
/// can be read without reproducing it.
pub fn last_words(c: &LocalCluster, volume: &Proc, lines: usize) -> String {
    let tail = |log: String| {
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    };
    let mut out = format!("--- volume\n{}\n", tail(volume.log()));
    for d in daemons_of(c) {
        out += &format!("--- {d:?}\n{}\n", tail(c.log(d)));
    }
    // What each daemon holds now (a stall leaves no log lines: its state says where).
    for d in daemons_of(c) {
        match c.status(d) {
            Ok(v) => out += &format!("--- {d:?} status\n{v}\n"),
            Err(e) => out += &format!("--- {d:?} status: {e}\n"),
        }
    }
    out
}

fn daemons_of(c: &LocalCluster) -> Vec<Daemon> {
    let mut daemons = vec![Daemon::Mds];
    daemons.extend((0..c.servers()).map(Daemon::Server));
    daemons.extend((0..c.loggers()).map(Daemon::Logger));
    daemons
}
