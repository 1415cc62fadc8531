//! `volume worst-case`: Everest's worst case (§4.2, Figure 10) on real processes. Two volume
//! servers, each with its base volume on an emulated `cheetah-15k`; machine 2's process also
//! serves a store whose log is a partition at the end of the same modeled disk
//! (`volume serve --store-here`), and machine 1 off-loads to it. fio's closed loop of random
//! 8 KiB requests, 30 % writes, depth 64 (the lab's OLTP load) runs on machine 1 alone for the
//! first phase, then on both at once for the second; each machine's throughput is divided by
//! that of one machine alone with no off-load (`--policy baseline`), measured in the same run.
//! Once without a bound on what machine 1 keeps off-loaded and once with
//! `--offload-bytes-max`, beside the paper's 93 % and 59 %.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use clap::Args;
use serde::Serialize;

use crate::fio_nbd::fio;
use crate::volume_bench::{
    explained, free_port, offloaded_bytes, spawn_until, work_dir, Proc, Setup,
};

#[derive(Args, Debug, Clone)]
pub struct WorstCaseArgs {
    /// Seconds of the first phase (machine 1 alone, off-loading); the paper's 10 minutes.
    #[arg(long, default_value_t = 60)]
    pub before_s: u64,
    /// Seconds of the second phase (both machines busy).
    #[arg(long, default_value_t = 60)]
    pub after_s: u64,
    /// The bound of the second configuration (`volume serve --offload-bytes-max`).
    #[arg(long, default_value = "64m")]
    pub bound: String,
    /// Each machine's database: the span of its volume the load covers (the lab's 7.5 GB).
    #[arg(long, default_value = "7680m")]
    pub region: String,
    /// Off-load while machine 1's base has more than this many requests in flight.
    #[arg(long, default_value_t = 4)]
    pub t_base: u64,
    /// Machine 1's `--n-reclaim`: reclaim operations in flight at most (the paper's and
    /// `volume serve`'s default, 256). Its reclaim starts whenever its base queue dips under
    /// `--t-base`, and then up to this many reads from the store at once.
    #[arg(long, default_value_t = 256)]
    pub n_reclaim: usize,
    /// Working directory (default: a fresh one in /dev/shm, else the temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Machine 1's `--full-timeout-ms`: how long a write that must stay off-loaded (it
    /// overwrites off-loaded data) may wait for the store. The paper's client has no such
    /// timeout; with `volume serve`'s 5 s, the store's appends, at the far end of a disk
    /// whose own volume keeps 64 requests queued, wait past it (shortest positioning first
    /// serves them only at its 4 s aging bound) and those writes fail with ENOSPC.
    #[arg(long, default_value_t = 60_000)]
    pub full_timeout_ms: u64,
    /// Machine 1's `--store-timeout-ms`: how long its store may leave every request
    /// unanswered before it counts as failed. With `volume serve`'s 3 s, the store on machine
    /// 2's busy disk (its requests wait up to the model's 4 s aging bound) is taken as failed
    /// while alive, and everything it holds is then reclaimed at any load (machine 1 after:
    /// 0.15× of its baseline); the paper's client does not take a slow store as failed.
    #[arg(long, default_value_t = 10_000)]
    pub store_timeout_ms: u64,
    /// Runs of the whole experiment (baseline, no bound, bound), each with fresh volumes and
    /// fio's random offsets drawn anew: the spread between them is the figures' noise.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `volume serve`'s store beside the volume (`VolumeOptions::store_here`).
#[derive(Args, Debug, Clone, Default)]
pub struct StoreHereArgs {
    /// Serve a store for other volumes from this process, its log in this file (created
    /// sparse at --store-here-size if absent). With --emulate its log is a partition at the
    /// end of the same modeled disk as the base volume, so the two contend for one spindle
    /// (a store on a busy server's own disk: Everest's worst case, `volume worst-case`).
    #[arg(long, value_name = "FILE", requires = "store_here_listen")]
    pub store_here: Option<PathBuf>,
    /// Where the store beside the volume listens (loopback unless --insecure: it takes no key).
    #[arg(long, value_name = "ADDR", requires = "store_here")]
    pub store_here_listen: Option<std::net::SocketAddr>,
    /// The log size of a new store beside the volume [default: 1g].
    #[arg(long, value_name = "SIZE", requires = "store_here")]
    pub store_here_size: Option<String>,
}

impl StoreHereArgs {
    pub fn options(&self) -> Result<Option<cordillera_runtime::volume_server::StoreHere>> {
        let (Some(path), Some(listen)) = (&self.store_here, self.store_here_listen) else {
            return Ok(None);
        };
        let log_bytes = match &self.store_here_size {
            Some(s) => cordillera_models::presets::parse_size(s).map_err(anyhow::Error::msg)?,
            None => 1 << 30,
        };
        Ok(Some(cordillera_runtime::volume_server::StoreHere {
            path: path.clone(),
            log_bytes,
            listen,
        }))
    }
}

/// fio's load on each machine: the lab's OLTP model (random 8 KiB, 30 % writes, 64 in flight).
const DEPTH: u32 = 64;

#[derive(Serialize, Debug)]
struct Row {
    config: String,
    bound_bytes: Option<u64>,
    offloaded_at_switch_bytes: u64,
    machine1_before_iops: f64,
    machine1_after_iops: f64,
    machine2_after_iops: f64,
    machine1_before: f64,
    machine1_after: f64,
    machine2_after: f64,
    /// Machine 1 in the second phase: pieces of reads its stores served (data it off-loaded
    /// onto machine 2's disk) and its base volume served, and writes it sent to stores.
    machine1_after_store_reads: u64,
    machine1_after_base_reads: u64,
    machine1_after_offloaded_writes: u64,
    /// Machine 1's requests answered in the second phase (reads and writes at its export),
    /// their mean response time, and how many took longer than 1 s.
    machine1_after_requests: u64,
    machine1_after_mean_ms: f64,
    machine1_after_over_1s: u64,
    /// Machine 1's own I/O in the second phase, by kind (`/status`'s `io_latency`: base reads,
    /// writes, flushes; store reads, writes, others): how many completed, their mean in ms.
    machine1_after_io: Vec<(String, u64, f64)>,
    /// In the second phase: the times machine 1 took its store as failed (no answer within the
    /// volume server's store timeout), the bytes it reclaimed, and of those the ones reclaimed
    /// as at risk (under any load: the copy's store had been taken as failed).
    machine1_after_store_failures: u64,
    /// Machine 1's `/status` sampled every 250 ms in the second phase.
    machine1_after_status_samples: StatusSamples,
    machine1_after_reclaimed_bytes: u64,
    machine1_after_reclaimed_at_risk_bytes: u64,
}

/// Machine 1's export histograms summed over reads and writes (`/metrics`): requests,
/// seconds, and requests answered within 1 s.
fn latency(metrics: &str) -> Result<[f64; 3]> {
    let addr = metrics
        .parse()
        .map_err(|e| anyhow!("metrics address {metrics}: {e}"))?;
    let text = cordillera_runtime::http::http_get(addr, "/metrics")?;
    let mut sums = [0.0; 3];
    for line in text.lines() {
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let slot = ["read", "write"].iter().find_map(|op| {
            let name = format!("cordillera_volume_{op}_seconds");
            match key.strip_prefix(name.as_str())? {
                "_count" => Some(0),
                "_sum" => Some(1),
                "_bucket{le=\"1\"}" => Some(2),
                _ => None,
            }
        });
        if let Some(i) = slot {
            sums[i] += value.parse::<f64>().map_err(|e| anyhow!("{line}: {e}"))?;
        }
    }
    Ok(sums)
}

/// Machine 1's `/status` document.
fn status(metrics: &str) -> Result<serde_json::Value> {
    let addr = metrics
        .parse()
        .map_err(|e| anyhow!("metrics address {metrics}: {e}"))?;
    let text = cordillera_runtime::http::http_get(addr, "/status")?;
    Ok(serde_json::from_str(&text)?)
}

/// Machine 1's counters from its `/status`: store reads, base reads, off-loaded writes, stores
/// taken as failed, bytes reclaimed, of which at risk (fewer than N copies on stores up).
fn counters(metrics: &str) -> Result<[u64; 6]> {
    let v = status(metrics)?;
    let field = |name: &str| {
        v[name]
            .as_u64()
            .ok_or_else(|| anyhow!("no {name} in the volume's status"))
    };
    Ok([
        field("store_reads")?,
        field("base_reads")?,
        field("offloaded_writes")?,
        field("store_failures")?,
        field("reclaimed_bytes")?,
        field("reclaimed_at_risk_bytes")?,
    ])
}

/// Machine 1's own I/O so far from its `/status`: per kind, completions and seconds.
fn io_latency(metrics: &str) -> Result<Vec<(String, u64, f64)>> {
    let v = status(metrics)?;
    let kinds = v["io_latency"]
        .as_object()
        .ok_or_else(|| anyhow!("no io_latency in the volume's status"))?;
    kinds
        .iter()
        .map(|(name, k)| {
            let count = k["count"].as_u64();
            let seconds = k["seconds"].as_f64();
            match (count, seconds) {
                (Some(c), Some(s)) => Ok((name.clone(), c, s)),
                _ => Err(anyhow!("io_latency.{name} without count and seconds")),
            }
        })
        .collect()
}

/// What happened between two [`io_latency`] readings: per kind, completions and mean ms.
fn io_between(
    before: &[(String, u64, f64)],
    after: &[(String, u64, f64)],
) -> Vec<(String, u64, f64)> {
    after
        .iter()
        .map(|(name, c, s)| {
            let (c0, s0) = before
                .iter()
                .find(|(n, _, _)| n == name)
                .map_or((0, 0.0), |(_, c, s)| (*c, *s));
            let n = c.saturating_sub(c0);
            (name.clone(), n, 1e3 * (s - s0) / n.max(1) as f64)
        })
        .collect()
}

/// Machine 1's T_store (`volume serve`'s default): a store whose load from others is at it or
/// above is not lightly loaded.
const T_STORE: u64 = 32;

/// Machine 1's `/status` sampled every 250 ms in the second phase.
#[derive(Serialize, Debug, Default)]
struct StatusSamples {
    samples: u64,
    /// Samples with its base queue under `--t-base` (its client reclaims then).
    base_under_t_base: u64,
    /// Samples with the stores full (it reclaims then whatever the stores' load).
    stores_full: u64,
    /// Samples where the load of the volume beside the store (machine 2's, on its disk) was at
    /// T_store or more: reclaim of a quiet base then keeps one read_any in flight there.
    store_loaded: u64,
    /// Means over the samples: the store's last reported load, its volume's load, and machine
    /// 1's requests in flight at the store.
    store_reported_load_mean: f64,
    store_volume_load_mean: f64,
    store_in_flight_mean: f64,
}

/// Samples machine 1's `/status` every 250 ms until `stop`.
fn sample_reclaim_conditions(
    metrics: String,
    (t_base, t_store): (u64, u64),
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<StatusSamples> {
    std::thread::spawn(move || {
        let mut n = StatusSamples::default();
        let mut sums = [0u64; 3];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok(v) = status(&metrics) {
                n.samples += 1;
                n.base_under_t_base +=
                    v["base_queue_length"].as_u64().is_some_and(|q| q < t_base) as u64;
                n.stores_full += v["stores_full"].as_bool().unwrap_or(false) as u64;
                let store = &v["stores"][0];
                let field = |name: &str| store[name].as_u64().unwrap_or(0);
                let others = field("volume_load");
                n.store_loaded += (others >= t_store) as u64;
                for (sum, x) in
                    sums.iter_mut()
                        .zip([field("reported_load"), others, field("in_flight")])
                {
                    *sum += x;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        let mean = |sum: u64| sum as f64 / n.samples.max(1) as f64;
        n.store_reported_load_mean = mean(sums[0]);
        n.store_volume_load_mean = mean(sums[1]);
        n.store_in_flight_mean = mean(sums[2]);
        n
    })
}

/// One run of the experiment: the baseline measured in it and its two configurations.
#[derive(Serialize, Debug)]
struct Round {
    baseline_iops: f64,
    /// Our variant's baseline: both machines busy at once without off-load (each machine's
    /// IOPS). The two share this host's CPUs, which the paper's two servers did not.
    both_busy_iops: [f64; 2],
    rows: Vec<Row>,
}

#[derive(Serialize, Debug)]
struct Figures {
    before_s: u64,
    after_s: u64,
    full_timeout_ms: u64,
    store_timeout_ms: u64,
    t_base: u64,
    n_reclaim: usize,
    region_bytes: u64,
    rounds: Vec<Round>,
    paper: &'static str,
}

const PAPER: &str = "after machine 2 starts: machine 1 at 93 % of its baseline, machine 2 at 59 % (936 MB, 13 % of the database, off-loaded in the first 10 min); no bound";

/// The run's files and program (the volume bench's `Setup`: fresh sparse bases of the region).
struct Machines<'a>(Setup<'a>);

impl Machines<'_> {
    /// A volume server on a fresh emulated base; `extra` adds flags. Returns the process, its
    /// NBD URI and its metrics address.
    fn volume(&self, name: &str, extra: &[String]) -> Result<(Proc, String, String)> {
        let base = self.0.base(&format!("{name}.base"))?;
        let mut args: Vec<String> = [
            "volume",
            "serve",
            "--format",
            "--emulate",
            "cheetah-15k",
            "--nbd",
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
            "--base",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(base.to_string_lossy().into());
        args.extend(extra.iter().cloned());
        // The store beside a volume starts before the export (machine 1's volume, started
        // next, also waits for its stores to be reached).
        let wanted = [
            "cordillera volume: NBD export at ",
            "cordillera volume: metrics at http://",
        ];
        let (p, found) = spawn_until(&self.0.me, &args, &wanted)?;
        let metrics = found[1].trim_end_matches("/metrics").to_string();
        Ok((p, found[0].clone(), metrics))
    }

    fn load(&self, uri: &str, seconds: u64) -> Result<f64> {
        Ok(fio(
            uri,
            "randrw",
            "8k",
            DEPTH,
            seconds,
            self.0.region,
            &["--rwmixread=70", "--randrepeat=0"],
        )?
        .iops)
    }

    /// The load on both exports at once; each one's IOPS.
    fn load_both(&self, uris: [&str; 2], seconds: u64) -> Result<[f64; 2]> {
        std::thread::scope(|s| {
            let second = s.spawn(|| self.load(uris[1], seconds));
            let first = self.load(uris[0], seconds);
            let second = second
                .join()
                .map_err(|_| anyhow!("the second machine's fio thread panicked"))?;
            Ok([first?, second?])
        })
    }

    /// One configuration: machine 2 (a plain volume with the store beside it), machine 1
    /// off-loading to that store (`bound` if any); phase 1 on machine 1, phase 2 on both.
    fn case(&self, a: &WorstCaseArgs, bound: Option<u64>, baseline: f64) -> Result<Row> {
        let store_addr = format!("127.0.0.1:{}", free_port()?);
        let m2_store = self.0.dir.join("m2.store");
        let _ = std::fs::remove_file(&m2_store);
        let (m2, m2_uri, _) = self.volume(
            "m2",
            &[
                "--store-here".into(),
                m2_store.to_string_lossy().into(),
                "--store-here-listen".into(),
                store_addr.clone(),
                "--store-here-size".into(),
                "4g".into(),
            ],
        )?;
        let mut extra: Vec<String> = vec![
            "--store".into(),
            store_addr,
            "--t-base".into(),
            a.t_base.to_string(),
            "--t-store".into(),
            T_STORE.to_string(),
            "--full-timeout-ms".into(),
            a.full_timeout_ms.to_string(),
            "--store-timeout-ms".into(),
            a.store_timeout_ms.to_string(),
            "--n-reclaim".into(),
            a.n_reclaim.to_string(),
        ];
        if let Some(b) = bound {
            extra.extend(["--offload-bytes-max".into(), b.to_string()]);
        }
        let (m1, m1_uri, m1_metrics) = self.volume("m1", &extra)?;
        let servers = [m1, m2];
        let label = match bound {
            Some(b) => format!("bound {} MiB", b >> 20),
            None => "no bound".to_string(),
        };
        eprintln!(
            "volume worst-case: {label}: machine 1 alone for {} s",
            a.before_s
        );
        let m1_before = explained(self.load(&m1_uri, a.before_s), &servers)?;
        let offloaded = explained(offloaded_bytes(&m1_metrics), &servers)?;
        eprintln!(
            "volume worst-case: {label}: {} MiB off-loaded; both machines for {} s",
            offloaded >> 20,
            a.after_s
        );
        let at_switch = explained(counters(&m1_metrics), &servers)?;
        let latency_at_switch = explained(latency(&m1_metrics), &servers)?;
        let io_at_switch = explained(io_latency(&m1_metrics), &servers)?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler =
            sample_reclaim_conditions(m1_metrics.clone(), (a.t_base, T_STORE), stop.clone());
        let both = self.load_both([&m1_uri, &m2_uri], a.after_s);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let samples = sampler.join().unwrap_or_default();
        let [m1_after, m2_after] = explained(both, &servers)?;
        let at_end = explained(counters(&m1_metrics), &servers)?;
        let latency_at_end = explained(latency(&m1_metrics), &servers)?;
        let io_at_end = explained(io_latency(&m1_metrics), &servers)?;
        let [requests, seconds, within_1s] =
            [0, 1, 2].map(|i| latency_at_end[i] - latency_at_switch[i]);
        let [store_reads, base_reads, offloaded_writes, failures, reclaimed, at_risk] =
            [0, 1, 2, 3, 4, 5].map(|i| at_end[i].saturating_sub(at_switch[i]));
        self.0.discard(&["m1.base", "m2.base", "m2.store"]);
        Ok(Row {
            config: label,
            bound_bytes: bound,
            offloaded_at_switch_bytes: offloaded,
            machine1_before_iops: m1_before,
            machine1_after_iops: m1_after,
            machine2_after_iops: m2_after,
            machine1_before: m1_before / baseline,
            machine1_after: m1_after / baseline,
            machine2_after: m2_after / baseline,
            machine1_after_store_reads: store_reads,
            machine1_after_base_reads: base_reads,
            machine1_after_offloaded_writes: offloaded_writes,
            machine1_after_requests: requests as u64,
            machine1_after_mean_ms: 1e3 * seconds / requests.max(1.0),
            machine1_after_over_1s: (requests - within_1s) as u64,
            machine1_after_io: io_between(&io_at_switch, &io_at_end),
            machine1_after_store_failures: failures,
            machine1_after_status_samples: samples,
            machine1_after_reclaimed_bytes: reclaimed,
            machine1_after_reclaimed_at_risk_bytes: at_risk,
        })
    }
}

pub fn run(a: WorstCaseArgs) -> Result<()> {
    let parse = |s: &str| cordillera_models::presets::parse_size(s).map_err(anyhow::Error::msg);
    let region = parse(&a.region)?;
    let bound = parse(&a.bound)?;
    let shm = Path::new("/dev/shm");
    let parent = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let (dir, _scratch) = work_dir(&a.dir, &parent, "cordillera-worst-case")?;
    let machines = Machines(Setup {
        me: crate::this_program()?,
        dir: &dir,
        region,
    });
    let mut rounds = Vec::new();
    for round in 1..=a.rounds {
        eprintln!(
            "volume worst-case: round {round} of {}: the baseline: one machine alone, no off-load, {} s",
            a.rounds, a.after_s
        );
        let baseline = {
            let (v, uri, _) = machines.volume("alone", &["--policy".into(), "baseline".into()])?;
            let iops = explained(machines.load(&uri, a.after_s), &[v])?;
            machines.0.discard(&["alone.base"]);
            iops
        };
        eprintln!(
            "volume worst-case: round {round}: both machines busy without off-load, {} s",
            a.after_s
        );
        let both_busy_iops = {
            let plain = ["--policy".to_string(), "baseline".to_string()];
            let (v1, uri1, _) = machines.volume("alone", &plain)?;
            let (v2, uri2, _) = machines.volume("alone2", &plain)?;
            let servers = [v1, v2];
            let both = explained(machines.load_both([&uri1, &uri2], a.after_s), &servers)?;
            machines.0.discard(&["alone.base", "alone2.base"]);
            both
        };
        let rows = vec![
            machines.case(&a, None, baseline)?,
            machines.case(&a, Some(bound), baseline)?,
        ];
        rounds.push(Round {
            baseline_iops: baseline,
            both_busy_iops,
            rows,
        });
    }
    let f = Figures {
        before_s: a.before_s,
        after_s: a.after_s,
        full_timeout_ms: a.full_timeout_ms,
        store_timeout_ms: a.store_timeout_ms,
        t_base: a.t_base,
        n_reclaim: a.n_reclaim,
        region_bytes: region,
        rounds,
        paper: PAPER,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
        return Ok(());
    }
    print_figures(&f);
    Ok(())
}

/// The table: a row per configuration and round, then each configuration's range over the
/// rounds when there are several.
fn print_figures(f: &Figures) {
    println!(
        "Worst case (Everest §4.2, Figure 10) on real processes: two volume servers on emulated cheetah-15k disks; machine 1 off-loads to a store on machine 2's disk; fio random 8 KiB, 30 % writes, depth 64 over {} MiB; {} s machine 1 alone, then {} s both; machine 1's full timeout {} ms, store timeout {} ms, T_base {}, N_reclaim {}. Throughput over one machine alone without off-load, measured in each round.",
        f.region_bytes >> 20,
        f.before_s,
        f.after_s,
        f.full_timeout_ms,
        f.store_timeout_ms,
        f.t_base,
        f.n_reclaim,
    );
    println!(
        "  {:<6} {:<16} {:>9} {:>12} {:>11} {:>10} {:>10} {:>16} {:>15}",
        "round",
        "",
        "baseline",
        "off-loaded",
        "m1 before",
        "m1 after",
        "m2 after",
        "m1 store reads",
        "m1 off-loads"
    );
    for (i, round) in f.rounds.iter().enumerate() {
        for r in &round.rows {
            let reads = r.machine1_after_store_reads + r.machine1_after_base_reads;
            println!(
                "  {:<6} {:<16} {:>5.0} IOPS {:>8} MiB {:>10.2}× {:>9.2}× {:>9.2}× {:>7} ({:>4.1} %) {:>15}",
                i + 1,
                r.config,
                round.baseline_iops,
                r.offloaded_at_switch_bytes >> 20,
                r.machine1_before,
                r.machine1_after,
                r.machine2_after,
                r.machine1_after_store_reads,
                100.0 * r.machine1_after_store_reads as f64 / reads.max(1) as f64,
                r.machine1_after_offloaded_writes,
            );
        }
    }
    println!("  (m1 store reads, m1 off-loads: in the second phase, pieces of machine 1's reads served by the store on machine 2's disk, of all its read pieces, and its writes sent there)");
    for (i, round) in f.rounds.iter().enumerate() {
        let [b1, b2] = round.both_busy_iops;
        println!(
            "  {:<6} both busy without off-load (our variant's baseline: one host's CPUs shared): {:.0} and {:.0} IOPS ({:.2}×, {:.2}× of one alone)",
            i + 1,
            b1,
            b2,
            b1 / round.baseline_iops,
            b2 / round.baseline_iops
        );
        for r in &round.rows {
            println!(
                "  {:<6} {:<16} over both busy: m1 after {:.2}×, m2 after {:.2}×; machine 1 after: {} requests, mean {:.0} ms, {} over 1 s",
                i + 1,
                r.config,
                r.machine1_after_iops / b1,
                r.machine2_after_iops / b2,
                r.machine1_after_requests,
                r.machine1_after_mean_ms,
                r.machine1_after_over_1s
            );
            let io: Vec<String> = r
                .machine1_after_io
                .iter()
                .filter(|(_, n, _)| *n > 0)
                .map(|(name, n, ms)| format!("{name} {n} × {ms:.0} ms"))
                .collect();
            println!(
                "  {:<6} {:<16} machine 1's own I/O after (completed × mean): {}",
                i + 1,
                r.config,
                io.join(", ")
            );
            let s = &r.machine1_after_status_samples;
            println!(
                "  {:<6} {:<16} machine 1 after: store taken as failed {} times; {} MiB reclaimed, {} MiB of it at risk (reclaimed under any load); of {} samples of its status, {} with its base queue under T_base, {} with the stores full, {} with machine 2's volume at T_store ({T_STORE}) or more on the store's disk (store's reported load {:.1}, machine 2's volume's {:.1}, machine 1's requests there {:.1}, means)",
                i + 1,
                r.config,
                r.machine1_after_store_failures,
                r.machine1_after_reclaimed_bytes >> 20,
                r.machine1_after_reclaimed_at_risk_bytes >> 20,
                s.samples,
                s.base_under_t_base,
                s.stores_full,
                s.store_loaded,
                s.store_reported_load_mean,
                s.store_volume_load_mean,
                s.store_in_flight_mean,
            );
        }
    }
    if f.rounds.len() > 1 {
        for (c, first) in f.rounds[0].rows.iter().enumerate() {
            let range = |x: fn(&Row) -> f64| {
                let v: Vec<f64> = f.rounds.iter().map(|r| x(&r.rows[c])).collect();
                let (lo, hi) = v
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                format!("{lo:.2}–{hi:.2}×")
            };
            println!(
                "  {:<6} {:<16} m1 before {}, m1 after {}, m2 after {}",
                "range",
                first.config,
                range(|r| r.machine1_before),
                range(|r| r.machine1_after),
                range(|r| r.machine2_after)
            );
        }
    }
    println!("  paper: {PAPER}");
}
