//! §4.6's microbenchmarks on the simulated testbed, through the real cores.
//!
//! - Table 5 ([`super::table5`]), and with `table5_causes` what holds its streaming reads.
//! - Figure 12: a chunk server holding `data_per_server_bytes` fails for good; the MDS gives
//!   each of its groups a new replica in its gear group and the primaries copy the data. With
//!   power-aware grouping on N = 3(k + 1) servers the failed server's data is rebuilt onto k
//!   servers; the rate (bytes rebuilt over the time from the failure's detection to the last
//!   group's completion) for k = 1… and for 1 MB and 64 MB chunks (a rebuild copies one chunk
//!   per step). As on the paper's testbed, each server holds 64 groups (320 groups for 15
//!   servers), so that 64 MB chunks spread over the groups evenly enough.

use serde::Serialize;

use cordillera_gears::layout::{Layout, LayoutKind, LayoutSpec, RackPolicy};
use cordillera_gears::model::Topology;
use cordillera_gears::server::ServerStats;
use cordillera_sim::kernel::Nanos;
use cordillera_types::rng::SplitMix64;

use super::cluster::{Cluster, ClusterSpec};
use super::table5::{causes, table5, CauseRow, Table5Setup, ThroughputRow};

const S: Nanos = 1_000_000_000;

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
    /// Table 5's setup (the paper's unless changed to see what a figure owes to it).
    pub table5: Table5Setup,
    /// Also run the streaming reads changed one respect at a time ([`causes`]).
    pub table5_causes: bool,
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
            &options.table5,
            options.seed,
            progress,
        )?,
        table5_setup: options.table5,
        causes: if options.table5_causes {
            causes(options.measure_s, options.seed, progress)?
        } else {
            Vec::new()
        },
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
    pub table5_setup: Table5Setup,
    /// The streaming reads changed one respect at a time (empty unless asked).
    pub causes: Vec<CauseRow>,
    pub figure12: Vec<RebuildPoint>,
    pub data_per_server_bytes: u64,
}

/// `groups_per_server`: groups with a replica on each server (64·N groups in all is the
/// default, 192 per server; the paper's testbed had 320 for 15 servers, 64 per server).
pub(super) fn layout(
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
