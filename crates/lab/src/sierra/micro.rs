//! §4.6's microbenchmarks on the simulated testbed, through the real cores.
//!
//! - Table 5: 9 clients in one rack against 9 chunk servers in another, each client on its own
//!   object: 64 KB streaming reads and writes (one request outstanding per client, as the
//!   single-server measurement of Table 4), and 64 KB random reads and writes with 64
//!   outstanding per client. Aggregate throughput, and the paper's "ideal": nine times one
//!   server for reads, a third of that for writes (3-way replication).
//! - Figure 12: a chunk server holding `data_per_server_bytes` fails for good; the MDS gives
//!   each of its groups a new replica in its gear group and the primaries copy the data. With
//!   power-aware grouping on N = 3(k + 1) servers the failed server's data is rebuilt onto k
//!   servers; the rate (bytes rebuilt over the time from the failure's detection to the last
//!   group's completion) for k = 1… and for 1 MB and 64 MB chunks (a rebuild copies one chunk
//!   per step). As on the paper's testbed, each server holds 64 groups (320 groups for 15
//!   servers), so that 64 MB chunks spread over the groups evenly enough.

use serde::Serialize;

use cordillera_gears::layout::{Layout, LayoutKind, LayoutSpec, RackPolicy};
use cordillera_gears::model::{Topology, GROUPS_PER_SERVER_DEFAULT};
use cordillera_gears::server::ServerStats;
use cordillera_sim::kernel::Nanos;
use cordillera_types::rng::SplitMix64;

use super::cluster::{ClosedLoop, Cluster, ClusterSpec};

const S: Nanos = 1_000_000_000;

#[derive(Clone, Debug, Serialize)]
pub struct ThroughputRow {
    pub workload: &'static str,
    /// MB/s (2^20 bytes) for streaming, IOPS for random.
    pub aggregate: f64,
    pub per_client_min: f64,
    pub per_client_max: f64,
    /// The paper's ideal from our single-server figures (Table 4 on our disk model).
    pub ideal: f64,
    pub paper: f64,
    pub paper_ideal: f64,
    pub unit: &'static str,
    /// Requests answered with an error (every attempt timed out or was refused).
    pub failed: u64,
    /// Client attempts that timed out (then retried) during the run.
    pub client_timeouts: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RebuildPoint {
    pub chunk_bytes: u64,
    pub servers: usize,
    /// Servers the failed server's data is rebuilt onto.
    pub write_servers: usize,
    pub rebuilt_bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct MicroOptions {
    /// Seconds each Table 5 workload is measured.
    pub measure_s: u64,
    /// Data on the failed server of Figure 12 (the paper: about 200 GB).
    pub data_per_server_bytes: u64,
    /// Figure 12's largest number of servers written to.
    pub max_write_servers: usize,
    /// Table 5's chunk-server read-ahead in place of the preset's (`None`: the preset's).
    pub read_ahead_bytes: Option<u64>,
    pub seed: u64,
}

/// Table 5 and Figure 12.
pub fn run(
    options: &MicroOptions,
    server: &cordillera_gears::load::ServerPerformance,
    progress: &mut dyn FnMut(&str),
) -> Result<MicroReport, String> {
    Ok(MicroReport {
        table5: table5(
            server,
            options.measure_s,
            options.read_ahead_bytes,
            options.seed,
            progress,
        )?,
        read_ahead_bytes: options.read_ahead_bytes,
        measure_s: options.measure_s,
        figure12: figure12(
            options.max_write_servers,
            options.data_per_server_bytes,
            options.seed,
            progress,
        )?,
        data_per_server_bytes: options.data_per_server_bytes,
    })
}

#[derive(Clone, Debug, Serialize)]
pub struct MicroReport {
    pub table5: Vec<ThroughputRow>,
    pub measure_s: u64,
    /// Table 5's read-ahead when not the preset's.
    pub read_ahead_bytes: Option<u64>,
    pub figure12: Vec<RebuildPoint>,
    pub data_per_server_bytes: u64,
}

/// `groups_per_server`: groups with a replica on each server (64·N groups in all is the
/// default, 192 per server; the paper's testbed had 320 for 15 servers, 64 per server).
fn layout(
    racks: u32,
    per_rack: u32,
    policy: RackPolicy,
    groups_per_server: usize,
    seed: u64,
) -> Result<Layout, String> {
    let topology = Topology::racks(racks, per_rack);
    let spec = LayoutSpec {
        kind: LayoutKind::PowerAware,
        racks: policy,
        replicas: 3,
    };
    let groups = topology.servers() * groups_per_server / 3;
    Layout::generate(spec, &topology, groups, &mut SplitMix64(seed)).map_err(|e| e.to_string())
}

/// One Table 5 row: 9 clients, each on its own 2.4 GB object, for `measure_s` after a
/// second of warm-up.
fn throughput(
    load: ClosedLoop,
    measure_s: u64,
    read_ahead_bytes: Option<u64>,
    seed: u64,
) -> Result<(Vec<f64>, u64, u64), String> {
    const CLIENTS: usize = 9;
    let object = 2400 << 20;
    let spec = ClusterSpec {
        read_ahead_bytes,
        // Rack 0: the chunk servers (and the MDS); rack 1: the clients.
        client_rack: Some(1),
        seed,
        ..ClusterSpec::new(
            layout(
                1,
                9,
                RackPolicy::Ignored,
                3 * GROUPS_PER_SERVER_DEFAULT as usize,
                seed,
            )?,
            0,
            vec![object; CLIENTS],
        )
    };
    let mut cluster = Cluster::new(spec, vec![Some(load); CLIENTS])?;
    cluster.start(60 * S)?;
    let t0 = cluster.now() + S;
    cluster.run_until(t0);
    let per_client = |c: &Cluster| c.client_bytes_done();
    let before = per_client(&cluster);
    cluster.run_until(t0 + measure_s * S);
    let after = per_client(&cluster);
    let unit = |bytes: u64| {
        if load.sequential {
            bytes as f64 / (1 << 20) as f64 / measure_s as f64
        } else {
            bytes as f64 / load.request_bytes as f64 / measure_s as f64
        }
    };
    let rates = before
        .iter()
        .zip(&after)
        .map(|(b, a)| unit(a - b))
        .collect();
    let end = cluster.counters();
    Ok((rates, end.failed, end.client_timeouts))
}

/// Table 5, with the single server's figures (`server`: read and write MB/s and IOPS of one
/// server) for the ideal.
pub fn table5(
    server: &cordillera_gears::load::ServerPerformance,
    measure_s: u64,
    read_ahead_bytes: Option<u64>,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<ThroughputRow>, String> {
    let mb = (1 << 20) as f64;
    // (workload, writes, streaming, outstanding, ideal, paper, paper's ideal, unit)
    type Row = (&'static str, bool, bool, usize, f64, f64, f64, &'static str);
    let rows: [Row; 4] = [
        (
            "streaming writes",
            true,
            true,
            1,
            server.write_bytes_per_s / mb * 3.0,
            96.0,
            246.0,
            "MB/s",
        ),
        (
            "streaming reads",
            false,
            true,
            1,
            server.read_bytes_per_s / mb * 9.0,
            348.0,
            738.0,
            "MB/s",
        ),
        (
            "random writes",
            true,
            false,
            64,
            server.write_iops * 3.0,
            465.0,
            537.0,
            "IOPS",
        ),
        (
            "random reads",
            false,
            false,
            64,
            server.read_iops * 9.0,
            1152.0,
            1233.0,
            "IOPS",
        ),
    ];
    let mut out = Vec::new();
    for (workload, write, sequential, outstanding, ideal, paper, paper_ideal, unit) in rows {
        progress(&format!(
            "table 5: {workload}, 9 clients on 9 chunk servers"
        ));
        let load = ClosedLoop {
            write,
            sequential,
            request_bytes: 64 << 10,
            outstanding,
        };
        let (rates, failed, client_timeouts) = throughput(load, measure_s, read_ahead_bytes, seed)?;
        out.push(ThroughputRow {
            workload,
            aggregate: rates.iter().sum(),
            per_client_min: rates.iter().copied().fold(f64::INFINITY, f64::min),
            per_client_max: rates.iter().copied().fold(0.0, f64::max),
            ideal,
            paper,
            paper_ideal,
            unit,
            failed,
            client_timeouts,
        });
    }
    Ok(out)
}

/// One Figure 12 point: N = 3(k + 1) servers in 3 racks (rack-aligned power-aware grouping,
/// so each gear group has k + 1 servers and a failed server's groups go to its k peers), each
/// holding `data_per_server` in 1 MB or 64 MB chunks; server 0 fails for good.
fn rebuild(
    write_servers: usize,
    chunk_bytes: u64,
    data_per_server: u64,
    seed: u64,
) -> Result<RebuildPoint, String> {
    let n = 3 * (write_servers + 1);
    // Each server holds a third of the replicas of everything: N × data / 3 in all.
    let total = n as u64 * data_per_server / 3;
    let objects = 8u64;
    let per_object = (total / objects).div_ceil(chunk_bytes) * chunk_bytes;
    let spec = ClusterSpec {
        chunk_bytes,
        rebuild_piece_bytes: chunk_bytes,
        permanent_after_ns: 5 * S,
        clients: 1,
        seed,
        ..ClusterSpec::new(
            layout(3, (write_servers + 1) as u32, RackPolicy::Aligned, 64, seed)?,
            0,
            vec![per_object; objects as usize],
        )
    };
    let mut cluster = Cluster::new(spec, Vec::new())?;
    cluster.start(120 * S)?;
    let failed_at = cluster.now() + S;
    cluster.world.schedule_crash(1, failed_at, None);
    let rebuilt = |c: &Cluster| -> (u64, u64, u64) {
        let stats: Vec<ServerStats> = c.server_stats();
        let m = c.counters().mds;
        (
            stats.iter().map(|s| s.rebuilt_bytes).sum(),
            m.rebuilds_started,
            m.rebuilds_done,
        )
    };
    let mut t = failed_at;
    let mut started_at = None;
    loop {
        t += S / 10;
        cluster.run_until(t);
        let (bytes, started, done) = rebuilt(&cluster);
        if started > 0 && started_at.is_none() {
            started_at = Some(t);
        }
        if started > 0 && done == started {
            let from = started_at.expect("started");
            // Whole tenths of a second: the rate's error is below a percent over the times
            // measured.
            let seconds = (t - from) as f64 / 1e9;
            return Ok(RebuildPoint {
                chunk_bytes,
                servers: n,
                write_servers,
                rebuilt_bytes: bytes,
                seconds,
                mb_per_s: bytes as f64 / (1 << 20) as f64 / seconds.max(1e-9),
            });
        }
        if t > failed_at + 4 * 3600 * S {
            return Err(format!(
                "the rebuild onto {write_servers} servers did not finish in 4 h ({bytes} bytes, {done} of {started} groups)"
            ));
        }
    }
}

/// Figure 12 for k = 1..=`max_write_servers`, 1 MB and 64 MB chunks.
pub fn figure12(
    max_write_servers: usize,
    data_per_server: u64,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<RebuildPoint>, String> {
    let mut out = Vec::new();
    for chunk in [1u64 << 20, 64 << 20] {
        for k in 1..=max_write_servers {
            progress(&format!(
                "figure 12: rebuild of {:.1} GB onto {k} servers, {} MB chunks",
                data_per_server as f64 / 1e9,
                chunk >> 20
            ));
            out.push(rebuild(k, chunk, data_per_server, seed)?);
        }
    }
    Ok(out)
}
