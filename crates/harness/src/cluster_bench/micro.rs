//! Table 5's throughput and Figure 12's rebuild rate on local clusters of emulated disks.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use cordillera_gears::load::ServerPerformance;
use cordillera_procs::cluster::{ClusterOptions, Daemon, LocalCluster};
use cordillera_runtime::nbd_client::NbdUrl;
use cordillera_runtime::replay::{replay, Mode, ReplayOptions};
use cordillera_trace::Record;
use cordillera_types::Op;

use cordillera_procs::process::Proc;

use serde::Serialize;

use super::{start_volume, ClusterBenchArgs};

#[derive(Clone, Debug, Serialize)]
pub(super) struct ThroughputRow {
    pub(super) workload: &'static str,
    pub(super) unit: &'static str,
    pub(super) measured: f64,
    pub(super) ideal: f64,
    pub(super) paper: f64,
    pub(super) paper_ideal: f64,
    pub(super) errors: u64,
    /// Write rows: the same workload on a plain volume on one emulated disk, in the same run.
    pub(super) plain: Option<PlainWrite>,
}

/// A Table 5 write workload on a plain volume whose base is one emulated disk of the cluster's
/// model, at the queue depth each of the cluster's disks sees.
#[derive(Clone, Debug, Serialize)]
pub(super) struct PlainWrite {
    pub(super) depth: usize,
    pub(super) measured: f64,
    /// One disk's figure (Table 4's performance).
    pub(super) ideal: f64,
    pub(super) errors: u64,
    /// The cluster's figure over N/r plain volumes' (1: replication costs nothing beyond the
    /// r copies on the disks).
    pub(super) cluster_over_plain_disks: f64,
}

/// Figure 12: one permanent failure and its rebuild.
#[derive(Clone, Debug, Serialize)]
pub(super) struct RebuildRow {
    pub(super) servers: usize,
    /// Servers the failed one's groups are rebuilt onto.
    pub(super) writers: usize,
    pub(super) groups: u64,
    pub(super) bytes: u64,
    /// From the MDS declaring the failure to the last group rebuilt.
    pub(super) seconds: f64,
    pub(super) mb_per_s: f64,
}

/// Table 5: closed-loop streaming and random throughput in the top gear, against the ideal of
/// the servers' emulated disks (Table 4's performance: writes reach r disks, reads one).
pub(super) fn table5(
    a: &ClusterBenchArgs,
    me: &Path,
    dir: &Path,
    servers: usize,
    object_bytes: u64,
) -> Result<Vec<ThroughputRow>> {
    std::fs::create_dir_all(dir)?;
    let options = ClusterOptions {
        racks: a.racks,
        per_rack: a.per_rack,
        emulate: Some(a.emulate.clone()),
        wake_seconds: a.wake_seconds,
        logger_size: "256m".into(),
        ..ClusterOptions::default()
    };
    eprintln!("cluster bench: Table 5: starting the cluster");
    let mut cluster = LocalCluster::start(me, &dir.join("cluster"), options)
        .map_err(|e| anyhow!("starting the cluster: {e}"))?;
    let result = (|| -> Result<Vec<ThroughputRow>> {
        let (_volume, url) = start_volume(&cluster, "table5", &a.object_size)?;
        let url: NbdUrl = url.parse()?;
        let perf = ServerPerformance::sierra_table4();
        let (n, r, mb) = (servers as f64, 3.0, 1e6);
        // (workload, op, streaming, depth, ideal, paper, paper's ideal, unit)
        type Row = (&'static str, Op, bool, usize, f64, f64, f64, &'static str);
        let rows: [Row; 4] = [
            (
                "streaming writes",
                Op::Write,
                true,
                servers,
                perf.write_bytes_per_s * n / r / mb,
                96.0,
                246.0,
                "MB/s",
            ),
            (
                "streaming reads",
                Op::Read,
                true,
                servers,
                perf.read_bytes_per_s * n / mb,
                348.0,
                738.0,
                "MB/s",
            ),
            (
                "random writes",
                Op::Write,
                false,
                RANDOM_DEPTH,
                perf.write_iops * n / r,
                465.0,
                537.0,
                "IOPS",
            ),
            (
                "random reads",
                Op::Read,
                false,
                RANDOM_DEPTH,
                perf.read_iops * n,
                1152.0,
                1233.0,
                "IOPS",
            ),
        ];
        let mut out = Vec::new();
        for (workload, op, streaming, depth, ideal, paper, paper_ideal, unit) in rows {
            let (measured, errors) =
                measure(a, &url, workload, op, streaming, depth, object_bytes)?;
            out.push(ThroughputRow {
                workload,
                unit,
                measured,
                ideal,
                paper,
                paper_ideal,
                errors,
                plain: None,
            });
        }
        Ok(out)
    })();
    cluster.stop();
    let mut rows = result?;
    for row in rows.iter_mut().filter(|r| r.workload.ends_with("writes")) {
        let streaming = row.unit == "MB/s";
        let cluster_depth = if streaming { servers } else { RANDOM_DEPTH };
        row.plain = Some(plain_write(
            a,
            me,
            dir,
            row,
            (streaming, cluster_depth, servers),
            object_bytes,
        )?);
    }
    Ok(rows)
}

/// Closed-loop depth of Table 5's random runs (the paper's clients kept 64 KB requests going).
const RANDOM_DEPTH: usize = 64;

/// One Table 5 workload for `--throughput-seconds` on `url`: MB/s for streaming runs, IOPS for
/// random ones, and how many requests failed.
fn measure(
    a: &ClusterBenchArgs,
    url: &NbdUrl,
    workload: &str,
    op: Op,
    streaming: bool,
    depth: usize,
    object_bytes: u64,
) -> Result<(f64, u64)> {
    eprintln!(
        "cluster bench: Table 5: {workload} for {} s at depth {depth}",
        a.throughput_seconds
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let length: u64 = if streaming { 1 << 20 } else { 64 << 10 };
    let deadline = Instant::now() + Duration::from_secs(a.throughput_seconds);
    let streams = if streaming { depth as u64 } else { 0 };
    let records = pieces(op, object_bytes, length, streams, a.seed, Some(deadline));
    let options = ReplayOptions {
        mode: Mode::Closed { depth },
        interval_s: 1.0,
        max_outstanding: depth,
        max_records: None,
        progress_every: None,
    };
    let report = runtime
        .block_on(replay(url, records, &options))
        .map_err(|e| anyhow!("Table 5 {workload}: {e}"))?;
    let measured = if streaming {
        report.mb_per_s
    } else {
        report.iops
    };
    Ok((measured, report.errors))
}

/// A Table 5 write workload on a plain volume (`volume serve --policy baseline`: no replicas,
/// no chunk servers, no network between servers) whose base is one emulated disk of the
/// cluster's model, in memory beside the cluster's files. Its depth is what each of the
/// cluster's disks has in flight on average (the cluster's depth × r / N, at least 1), so
/// both runs load a disk alike: the cluster then gives N/r times the plain volume if
/// replication costs nothing beyond the disks.
fn plain_write(
    a: &ClusterBenchArgs,
    me: &Path,
    dir: &Path,
    row: &ThroughputRow,
    (streaming, cluster_depth, servers): (bool, usize, usize),
    object_bytes: u64,
) -> Result<PlainWrite> {
    let r = 3;
    let depth = (cluster_depth * r).div_ceil(servers).max(1);
    let base = dir.join("plain.base");
    let _ = std::fs::remove_file(&base);
    // The volume keeps its label past the data (formatted here); sparse, as the chunk files.
    std::fs::File::create(&base)?.set_len(object_bytes + (1 << 20))?;
    let args: Vec<String> = [
        "volume",
        "serve",
        "--format",
        "--policy",
        "baseline",
        "--nbd",
        "127.0.0.1:0",
        "--emulate",
        &a.emulate,
        "--base",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([base.display().to_string()])
    .collect();
    let (volume, found) = Proc::spawn_until(me, &args, &["cordillera volume: NBD export at "])
        .map_err(|e| anyhow!("the plain volume: {e}"))?;
    let url: NbdUrl = found[0].trim().parse()?;
    let workload = format!("{} on a plain volume", row.workload);
    let measured = measure(
        a,
        &url,
        &workload,
        Op::Write,
        streaming,
        depth,
        object_bytes,
    );
    drop(volume);
    let _ = std::fs::remove_file(&base);
    let (measured, errors) = measured?;
    let perf = ServerPerformance::sierra_table4();
    let ideal = if streaming {
        perf.write_bytes_per_s / 1e6
    } else {
        perf.write_iops
    };
    Ok(PlainWrite {
        depth,
        measured,
        ideal,
        errors,
        cluster_over_plain_disks: row.measured / (measured * servers as f64 / r as f64),
    })
}

/// Requests that write (or read) `object_bytes` in `length` pieces, `streams` walking their own
/// parts of the object in order; random pieces when `streams` is 0; until `deadline`.
fn pieces(
    op: Op,
    object_bytes: u64,
    length: u64,
    streams: u64,
    seed: u64,
    deadline: Option<Instant>,
) -> impl Iterator<Item = Record> {
    let slots = (object_bytes / length).max(1);
    let mut rng = cordillera_types::rng::SimRng::new(seed, 51);
    let per_stream = (slots / streams.max(1)).max(1);
    (0u64..)
        .map(move |i| {
            let slot = if streams > 0 {
                (i % streams) * per_stream + (i / streams) % per_stream
            } else {
                rng.below(slots)
            };
            Record {
                time_ns: 0,
                volume: cordillera_trace::VolumeId(0),
                op,
                offset_bytes: slot * length,
                length_bytes: length,
                response_ns: None,
            }
        })
        .take_while(move |_| deadline.is_none_or(|d| Instant::now() < d))
}

/// Figure 12 in small: a cluster of `per_rack` servers per rack, `per_server` bytes on each,
/// one server killed and declared failed; its groups are rebuilt onto its gear group.
pub(super) fn rebuild_run(
    a: &ClusterBenchArgs,
    me: &Path,
    dir: &Path,
    per_rack: u32,
    per_server: u64,
) -> Result<RebuildRow> {
    if per_rack < 2 {
        bail!("--rebuild-per-rack: at least 2 servers per rack (one to fail, one to write)");
    }
    std::fs::create_dir_all(dir)?;
    let servers = a.racks * per_rack as usize;
    let object_bytes = (per_server * servers as u64 / 3) >> 20 << 20;
    let options = ClusterOptions {
        racks: a.racks,
        per_rack,
        emulate: Some(a.emulate.clone()),
        wake_seconds: a.wake_seconds,
        logger_size: "256m".into(),
        permanent_after_s: 3,
        ..ClusterOptions::default()
    };
    eprintln!(
        "cluster bench: Figure 12: {servers} servers, writing {} MiB",
        object_bytes >> 20
    );
    let mut cluster = LocalCluster::start(me, &dir.join("cluster"), options)
        .map_err(|e| anyhow!("starting the cluster: {e}"))?;
    let result = (|| -> Result<RebuildRow> {
        let (_volume, url) = start_volume(&cluster, "rebuild", &format!("{}", object_bytes))?;
        let url: NbdUrl = url.parse()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let fill = runtime
            .block_on(replay(
                &url,
                pieces(
                    Op::Write,
                    object_bytes,
                    1 << 20,
                    servers as u64,
                    a.seed,
                    None,
                )
                .take((object_bytes >> 20) as usize),
                &ReplayOptions {
                    mode: Mode::Closed { depth: servers },
                    ..ReplayOptions::default()
                },
            ))
            .map_err(|e| anyhow!("filling the object: {e}"))?;
        if fill.errors > 0 {
            bail!("filling the object: {} writes failed", fill.errors);
        }
        cluster.kill(Daemon::Server(0));
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut declared = None;
        let mds = loop {
            let mds = cluster.status(Daemon::Mds).map_err(|e| anyhow!(e))?;
            let stats = &mds["stats"];
            if declared.is_none() && stats["permanent_failures"].as_u64() >= Some(1) {
                declared = Some(Instant::now());
            }
            let started = stats["rebuilds_started"].as_u64().unwrap_or(0);
            if started > 0 && stats["rebuilds_done"].as_u64() == Some(started) {
                break mds;
            }
            if Instant::now() > deadline {
                bail!("the rebuild did not finish within 600 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let seconds = declared.map_or(0.0, |d| d.elapsed().as_secs_f64());
        let mut bytes = 0;
        for s in 1..cluster.servers() {
            bytes += cluster.status(Daemon::Server(s)).map_err(|e| anyhow!(e))?["stats"]
                ["rebuilt_bytes"]
                .as_u64()
                .unwrap_or(0);
        }
        Ok(RebuildRow {
            servers,
            writers: per_rack as usize - 1,
            groups: mds["stats"]["rebuilds_done"].as_u64().unwrap_or(0),
            bytes,
            seconds,
            mb_per_s: bytes as f64 / 1e6 / seconds.max(1e-3),
        })
    })();
    cluster.stop();
    result
}
