//! Table 5 (§4.6) on the simulated testbed, through the real cores: 9 clients in one rack
//! against 9 chunk servers in another, each client on its own 2.4 GB object: 64 KB streaming
//! reads and writes (one request outstanding per client, as the single-server measurement of
//! Table 4), and 64 KB random reads and writes with 64 outstanding per client. Aggregate
//! throughput, and the paper's "ideal": nine times one server for reads, a third of that for
//! writes (3-way replication).
//!
//! [`causes`] isolates what holds the streaming reads below the paper's: the same run changed
//! in one respect at a time (the read-ahead's size and timing, the network's forwarding, the
//! requests each client keeps outstanding, one client alone), then together.

use serde::Serialize;

use cordillera_gears::layout::RackPolicy;
use cordillera_gears::model::GROUPS_PER_SERVER_DEFAULT;
use cordillera_sim::kernel::Nanos;

use super::cluster::{ClosedLoop, Cluster, ClusterSpec};
use super::micro::layout;

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

/// How Table 5's cluster is set up: the paper's setup by default; the causes experiment
/// changes one thing at a time.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Table5Setup {
    pub clients: usize,
    /// Requests each streaming client keeps outstanding (the random workloads keep 64).
    pub streaming_outstanding: usize,
    /// The chunk servers' read-ahead size (`None`: the preset's 256 KiB).
    pub read_ahead_bytes: Option<u64>,
    /// The read-ahead done asynchronously ([`cordillera_models::device::hdd::ReadAhead`]).
    pub read_ahead_async: bool,
    /// Switches forward packets as they arrive ([`cordillera_sim::network::NetworkParams`]).
    pub cut_through: bool,
}

impl Default for Table5Setup {
    fn default() -> Table5Setup {
        Table5Setup {
            clients: 9,
            streaming_outstanding: 1,
            read_ahead_bytes: None,
            read_ahead_async: false,
            cut_through: false,
        }
    }
}

/// One run of a Table 5 workload.
struct Measured {
    /// Per client, MB/s or IOPS.
    rates: Vec<f64>,
    failed: u64,
    client_timeouts: u64,
    mean_ms: f64,
    median_ms: f64,
    /// The chunk servers' disks' mean utilization.
    disk_busy: f64,
}

/// One Table 5 row: the clients, each on its own 2.4 GB object, for `measure_s` after a
/// second of warm-up.
fn throughput(
    load: ClosedLoop,
    measure_s: u64,
    setup: &Table5Setup,
    seed: u64,
) -> Result<Measured, String> {
    let object = 2400 << 20;
    let clients = setup.clients;
    let spec = ClusterSpec {
        read_ahead_bytes: setup.read_ahead_bytes,
        read_ahead_async: setup.read_ahead_async,
        cut_through: setup.cut_through,
        clients,
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
            vec![object; clients],
        )
    };
    let mut cluster = Cluster::new(spec, vec![Some(load); clients])?;
    cluster.start(60 * S)?;
    let t0 = cluster.now() + S;
    cluster.run_until(t0);
    let per_client = |c: &Cluster| c.client_bytes_done();
    let before = per_client(&cluster);
    let c0 = cluster.counters();
    cluster.run_until(t0 + measure_s * S);
    let after = per_client(&cluster);
    let c1 = cluster.counters();
    let busy: u64 = c0.busy_ns.iter().zip(&c1.busy_ns).map(|(a, b)| b - a).sum();
    let disk_busy = busy as f64 / (c1.busy_ns.len().max(1) as u64 * measure_s * S) as f64;
    // Requests issued in the measured seconds' minutes (the histogram keeps whole minutes).
    let h = cluster.observed.borrow().window(t0, t0 + measure_s * S);
    let ms = |ns: Option<f64>| ns.unwrap_or(0.0) / 1e6;
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
    Ok(Measured {
        rates,
        failed: c1.failed,
        client_timeouts: c1.client_timeouts,
        mean_ms: ms(h.mean_ns()),
        median_ms: ms(h.quantile_ns(0.5).map(|n| n as f64)),
        disk_busy,
    })
}

/// Table 5, with the single server's figures (`server`: read and write MB/s and IOPS of one
/// server) for the ideal.
pub fn table5(
    server: &cordillera_gears::load::ServerPerformance,
    measure_s: u64,
    setup: &Table5Setup,
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
            "table 5: {workload}, {} clients on 9 chunk servers",
            setup.clients
        ));
        let load = ClosedLoop {
            write,
            sequential,
            request_bytes: 64 << 10,
            outstanding: if sequential {
                setup.streaming_outstanding
            } else {
                outstanding
            },
        };
        let m = throughput(load, measure_s, setup, seed)?;
        let rates = m.rates;
        out.push(ThroughputRow {
            workload,
            aggregate: rates.iter().sum(),
            per_client_min: rates.iter().copied().fold(f64::INFINITY, f64::min),
            per_client_max: rates.iter().copied().fold(0.0, f64::max),
            ideal,
            paper,
            paper_ideal,
            unit,
            failed: m.failed,
            client_timeouts: m.client_timeouts,
        });
    }
    Ok(out)
}

/// One variant of the streaming-reads run.
#[derive(Clone, Debug, Serialize)]
pub struct CauseRow {
    pub variant: &'static str,
    pub setup: Table5Setup,
    /// MB/s (2^20 bytes), over the clients.
    pub aggregate: f64,
    pub per_client_min: f64,
    pub per_client_max: f64,
    /// Response times of the reads, ms.
    pub mean_ms: f64,
    pub median_ms: f64,
    /// The chunk servers' disks' mean utilization.
    pub disk_busy: f64,
}

/// Table 5's streaming reads as measured, then changed in one respect at a time, then in the
/// respects that each helped together.
pub fn causes(
    measure_s: u64,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<CauseRow>, String> {
    let paper = Table5Setup::default();
    let mib = Some(1 << 20);
    let variants: [(&'static str, Table5Setup); 9] = [
        ("as measured (the preset)", paper),
        (
            "read-ahead asynchronous",
            Table5Setup {
                read_ahead_async: true,
                ..paper
            },
        ),
        (
            "read-ahead 1 MiB",
            Table5Setup {
                read_ahead_bytes: mib,
                ..paper
            },
        ),
        (
            "cut-through network",
            Table5Setup {
                cut_through: true,
                ..paper
            },
        ),
        (
            "2 reads outstanding per client",
            Table5Setup {
                streaming_outstanding: 2,
                ..paper
            },
        ),
        (
            "one client alone",
            Table5Setup {
                clients: 1,
                ..paper
            },
        ),
        (
            "one client alone, cut-through",
            Table5Setup {
                clients: 1,
                cut_through: true,
                ..paper
            },
        ),
        (
            "1 MiB, cut-through",
            Table5Setup {
                read_ahead_bytes: mib,
                cut_through: true,
                ..paper
            },
        ),
        (
            "1 MiB, cut-through, 2 outstanding",
            Table5Setup {
                read_ahead_bytes: mib,
                cut_through: true,
                streaming_outstanding: 2,
                ..paper
            },
        ),
    ];
    let load = ClosedLoop {
        write: false,
        sequential: true,
        request_bytes: 64 << 10,
        outstanding: 1,
    };
    let mut out = Vec::new();
    for (variant, setup) in variants {
        progress(&format!("table 5 streaming reads: {variant}"));
        let load = ClosedLoop {
            outstanding: setup.streaming_outstanding,
            ..load
        };
        let m = throughput(load, measure_s, &setup, seed)?;
        assert_eq!(m.rates.len(), setup.clients, "a rate per client");
        out.push(CauseRow {
            variant,
            setup,
            aggregate: m.rates.iter().sum(),
            per_client_min: m.rates.iter().copied().fold(f64::INFINITY, f64::min),
            per_client_max: m.rates.iter().copied().fold(0.0, f64::max),
            mean_ms: m.mean_ms,
            median_ms: m.median_ms,
            disk_busy: m.disk_busy,
        });
    }
    Ok(out)
}
