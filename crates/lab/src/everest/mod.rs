//! `cordillera lab everest`: Everest §4.1 on any trace or generated workload, and the
//! micro-benchmarks of §4.3.
//!
//! 1. Find the top peak episodes (Table 1): 1-minute request rates, 15-minute segments, the
//!    peak's segment and the next one.
//! 2. In each episode, take the volumes with the maximum, median and minimum request counts.
//!    Each becomes a RAID-0 of four `cheetah-15k` disks hosting a client and, on the last 2.9 %,
//!    a store; every client off-loads to the other two volumes' stores (1-way, one server).
//! 3. Replay the episode open-loop from its timestamps under three configurations: baseline (no
//!    off-load), always off-load, peak off-load (T_base = T_store = 32, N_reclaim = 256).
//!
//! Then: off-loaded data over time (Figure 6), sensitivity to T_base, T_store and N_reclaim
//! (Figure 7), NVRAM with and without off-load (Figure 8), worst-case recovery (Table 3), the
//! client core's CPU time per off-loaded write, and the §4.3 micro-benchmarks.

use cordillera_models::device::nvram::NvramParams;
use cordillera_models::histogram::{Histogram, LatencySummary};
use cordillera_offload::client::Policy;
use cordillera_sim::kernel::Nanos;
use cordillera_trace::peaks::{Episode, PeaksBuilder, PeaksOptions};
use cordillera_trace::RecordReader;
use cordillera_types::units::{KIB, MIB};
use cordillera_types::Op;
use serde::Serialize;

use crate::volumes::{self, IoReq, Load, Outcome, Setup, VolumeSpec};

/// The parts of the experiment (`--parts`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parts {
    pub sensitivity: bool,
    pub nvram: bool,
    pub recovery: bool,
    pub micro: bool,
    /// §4.2's OLTP throughput (Figures 9, 11, 12).
    pub oltp: bool,
    /// §4.2's worst case (Figure 10): two busy servers, one reading back what it off-loaded
    /// onto the other's disk. Not in [`Parts::all`] (two 20-minute runs): `--parts worst-case`.
    pub worst_case: bool,
}

impl Parts {
    pub fn all() -> Parts {
        Parts {
            sensitivity: true,
            nvram: true,
            recovery: true,
            micro: true,
            oltp: true,
            worst_case: false,
        }
    }

    /// The progress steps one seed's run reports with these parts over `episodes` episodes.
    pub fn steps(&self, episodes: usize) -> usize {
        3 * episodes
            + if self.nvram { 2 * episodes } else { 0 }
            + if self.sensitivity { 14 } else { 0 }
            + self.recovery as usize
            + if self.micro { 18 } else { 0 }
            + if self.oltp { 15 } else { 0 }
            + if self.worst_case { 3 } else { 0 }
            + 2
    }
}

/// The sampling interval `--sample-s` names, in nanoseconds (0: chosen from the longest
/// episode): a multiple of the simulator's 0.1 s tick, from 0.1 to 3600 s.
pub fn sample_ns(sample_s: Option<f64>) -> Result<u64, String> {
    match sample_s {
        None => Ok(0),
        Some(s) if (0.1..=3600.0).contains(&s) && ((s * 10.0).round() - s * 10.0).abs() < 1e-9 => {
            Ok((s * 10.0).round() as u64 * 100_000_000)
        }
        Some(s) => Err(format!(
            "--sample-s {s}: must be a multiple of 0.1 s (the simulator's tick) from 0.1 to 3600"
        )),
    }
}

/// Whether each run's workload follows its seed: the built-in one, or a generated one whose
/// spec names no seed (a trace, or a spec with `seed=`, is the same in every run).
pub fn workload_seeded(trace: Option<&std::path::Path>) -> bool {
    trace.is_none_or(|p| {
        let spec = p.to_string_lossy();
        spec.starts_with("gen:") && !spec.contains("seed=")
    })
}

#[derive(Clone, Debug)]
pub struct Options {
    pub peaks: PeaksOptions,
    pub t_base: u64,
    pub t_store: u64,
    pub n_reclaim: usize,
    /// Sensitivity values (Figure 7).
    pub t_base_values: Vec<u64>,
    pub t_store_values: Vec<u64>,
    pub n_reclaim_values: Vec<usize>,
    /// NVRAM shared by the three volumes (Figure 8: 128 MB, half for writes).
    pub nvram_bytes: u64,
    pub nvram_write_fraction: f64,
    /// Micro-benchmark run length (§4.3: 20 s) and queue depth.
    pub micro_s: u64,
    pub micro_depth: usize,
    /// Requests the OLTP load keeps in flight (saturation).
    pub oltp_depth: usize,
    /// The OLTP load's fraction of writes (the paper's disk load: 27–32 %).
    pub oltp_write_fraction: f64,
    /// The OLTP load's hot region (uniform over the 7.5 GB when `None`, the default).
    pub oltp_hot: Option<crate::volumes::Hot>,
    /// The worst case (Figure 10): machine 2 starts after this long, the run lasts this much
    /// longer (the paper: 10 minutes, then a measurement), and the bound run beside it.
    pub worst_before_s: u64,
    pub worst_after_s: u64,
    pub worst_bound_bytes: u64,
    pub parts: Parts,
    /// Off-loaded data is sampled this often (Figure 6); 0: the longest episode over 200, in
    /// steps of 100 ms from 100 ms to 10 s (a 30-minute episode: 9 s; a 27 s trace: 100 ms).
    pub sample_ns: Nanos,
    pub seed: u64,
    /// The episodes' volumes (Figures 5 and 6): each a `device` preset, or an array of them
    /// (the testbed's: a RAID-0 of four `cheetah-15k`). The other parts keep the testbed.
    pub device: String,
    pub array: Option<cordillera_models::presets::ArraySpec>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            peaks: PeaksOptions::default(),
            t_base: 32,
            t_store: 32,
            n_reclaim: 256,
            t_base_values: vec![4, 16, 32, 64, 128],
            t_store_values: vec![4, 16, 32, 64, 128],
            n_reclaim_values: vec![16, 64, 256, 1024],
            nvram_bytes: 128 * MIB,
            nvram_write_fraction: 0.5,
            micro_s: 20,
            micro_depth: 32,
            oltp_depth: 64,
            oltp_write_fraction: 0.3,
            oltp_hot: None,
            worst_before_s: 600,
            worst_after_s: 600,
            worst_bound_bytes: 256 * MIB,
            parts: Parts::all(),
            sample_ns: 0,
            seed: 1,
            device: "cheetah-15k".into(),
            array: Some("raid0:4".parse().expect("a valid array")),
        }
    }
}

/// Response times of one configuration on one episode (all three volumes together).
#[derive(Clone, Debug, Serialize)]
pub struct ConfigResult {
    pub requests: u64,
    pub mean_ms: Option<f64>,
    /// 99th percentile over reads and writes together (Everest Table 2).
    pub p99_ms: Option<f64>,
    pub read_mean_ms: Option<f64>,
    pub write_mean_ms: Option<f64>,
    pub read_p99_ms: Option<f64>,
    pub write_p99_ms: Option<f64>,
    pub reads: LatencySummary,
    pub writes: LatencySummary,
    /// Per volume (maximum, median, minimum): mean response time, ms.
    pub volume_mean_ms: Vec<Option<f64>>,
    pub offloaded_writes: u64,
    pub offloaded_write_bytes: u64,
    pub reclaimed_bytes: u64,
    /// Reads served (in part) by stores.
    pub store_reads: u64,
    /// Off-loaded bytes, summed over the clients, at each sample (Figure 6).
    pub offloaded_bytes: Vec<u64>,
    /// The largest sum of the clients' off-loaded bytes at any moment (exact, not sampled).
    pub offloaded_max_bytes: u64,
    /// Time-average of the off-loaded bytes over the episode.
    pub offloaded_mean_bytes: f64,
    /// When the last request was answered (s from the episode start).
    pub last_answer_s: f64,
    /// Off-loaded bytes left when the run ended.
    pub offloaded_at_end_bytes: u64,
    /// The client core's time per off-loaded write and per request, µs (measured wall time of
    /// the client's calls on this machine; the simulator is single-threaded).
    pub client_us_per_offloaded_write: Option<f64>,
    pub client_us_per_request: Option<f64>,
    /// The client core's time over the run, ns (0 when not timed).
    pub client_cpu_ns: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct EpisodeVolumeInfo {
    pub volume: String,
    pub requests: u64,
    pub read_pct: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Configs {
    pub baseline: ConfigResult,
    pub always: ConfigResult,
    pub peak: ConfigResult,
}

#[derive(Clone, Debug, Serialize)]
pub struct EpisodeReport {
    pub rank: usize,
    pub start_s: f64,
    pub end_s: f64,
    /// All volumes of the episode (Table 1).
    pub requests: u64,
    pub read_pct: Option<f64>,
    pub peak_rate_per_s: f64,
    /// The peak the episode is about (seconds from the trace start) and whether the episode
    /// holds all of it (see `trace::peaks`).
    pub peak_start_s: f64,
    pub peak_end_s: f64,
    pub peak_whole: bool,
    /// The three replayed volumes.
    pub volumes: Vec<EpisodeVolumeInfo>,
    pub replayed_requests: u64,
    pub replayed_read_pct: Option<f64>,
    pub configs: Configs,
    /// Mean response time, baseline over peak off-load.
    pub peak_speedup: Option<f64>,
    pub always_speedup: Option<f64>,
    /// Figure 8.
    pub nvram: Option<NvramResult>,
}

#[derive(Clone, Debug, Serialize)]
pub struct NvramResult {
    pub baseline: ConfigResult,
    pub peak: ConfigResult,
}

/// One point of Figure 7: mean response time and mean off-loaded data across all episodes.
#[derive(Clone, Debug, Serialize)]
pub struct SensitivityPoint {
    pub parameter: &'static str,
    pub value: u64,
    pub mean_ms: Option<f64>,
    pub offloaded_mean_mb: f64,
    /// Fraction of reads that went (in part) to a store.
    pub offloaded_read_pct: f64,
}

/// Table 3: a crash of the server when the off-loaded data is largest.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryReport {
    pub episode: usize,
    pub crash_at_s: f64,
    pub max_log_bytes: u64,
    pub max_log_records: u64,
    pub max_valid_bytes: u64,
    pub max_store_recovery_s: f64,
    pub max_client_recovery_s: f64,
    pub metadata_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct MicroPoint {
    pub x: f64,
    pub offload_mb_per_s: f64,
    /// The same load without off-load (Figures 13a and 13c), or `None`.
    pub baseline_mb_per_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Micro {
    /// Figure 13(a): throughput vs read fraction, one store, always off-load, random 64 KiB.
    pub read_ratio: Vec<MicroPoint>,
    /// Figure 13(b): reclaim throughput vs reclaim concurrency.
    pub reclaim_random: Vec<MicroPoint>,
    pub reclaim_streaming: Vec<MicroPoint>,
    /// Figure 13(c): write throughput vs number of stores.
    pub stores: Vec<MicroPoint>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub source: String,
    pub device: String,
    pub array: String,
    pub store_partition_pct: f64,
    pub t_base: u64,
    pub t_store: u64,
    pub n_reclaim: usize,
    pub sample_s: f64,
    /// Where episodes lie around their peaks.
    pub align: cordillera_trace::peaks::EpisodeAlign,
    pub seed: u64,
    /// Episodes asked for; `episodes` may hold fewer (a notice says why).
    pub episodes_asked: usize,
    pub episodes: Vec<EpisodeReport>,
    pub sensitivity: Vec<SensitivityPoint>,
    pub recovery: Option<RecoveryReport>,
    /// What was asked for and could not be given, and why (fewer episodes than asked, no
    /// recovery run because nothing was off-loaded, a peak cut by the grid).
    pub notices: Vec<String>,
    /// Client core time per off-loaded write over every peak off-load run, µs.
    pub client_us_per_offloaded_write: Option<f64>,
    pub micro: Option<Micro>,
    pub oltp: Option<oltp::Oltp>,
    pub worst_case: Option<worst::WorstCase>,
}

/// A replayable episode: the three volumes' requests from the episode start.
struct Replay {
    info: Episode,
    volumes: Vec<EpisodeVolumeInfo>,
    loads: Vec<Vec<IoReq>>,
    duration_ns: Nanos,
}

/// Progress lines go to this callback (the CLI prints them on standard error).
pub type Progress<'a> = &'a mut dyn FnMut(&str);

/// Runs the experiment. `open` opens the trace (it is read twice: once for the peaks, once for
/// the episodes' requests).
pub fn run(
    open: &mut dyn FnMut() -> Result<Box<dyn RecordReader>, String>,
    source: &str,
    options: &Options,
    progress: Progress,
) -> Result<Report, String> {
    let replays = episodes(open, options, progress)?;
    if replays.is_empty() {
        return Err("the trace holds no request: no peak episode to replay".into());
    }
    let resolved;
    let options = if options.sample_ns == 0 {
        let longest = replays.iter().map(|r| r.duration_ns).max().unwrap_or(0);
        resolved = Options {
            sample_ns: auto_sample_ns(longest),
            ..options.clone()
        };
        &resolved
    } else {
        options
    };
    cordillera_models::presets::build(&options.device, options.array)?;
    let base = Setup {
        device: options.device.clone(),
        array: options.array,
        ..Setup::everest(Vec::new())
    };
    let layout = base.layout();
    let mut report = Report {
        source: source.to_owned(),
        device: base.device.clone(),
        array: options
            .array
            .map_or("none".into(), |a| crate::devices::array_text(&a)),
        store_partition_pct: 100.0 * (layout.capacity_bytes - layout.store_offset) as f64
            / layout.capacity_bytes as f64,
        t_base: options.t_base,
        t_store: options.t_store,
        n_reclaim: options.n_reclaim,
        sample_s: options.sample_ns as f64 / 1e9,
        align: options.peaks.align,
        seed: options.seed,
        episodes_asked: options.peaks.top,
        episodes: Vec::new(),
        sensitivity: Vec::new(),
        recovery: None,
        notices: Vec::new(),
        client_us_per_offloaded_write: None,
        micro: None,
        oltp: None,
        worst_case: None,
    };
    if replays.len() < options.peaks.top {
        report.notices.push(format!(
            "{} episodes asked for, {} found: the trace has no other window outside the episodes \
             found whose episode would not overlap them (a shorter --segment-s finds more)",
            options.peaks.top,
            replays.len()
        ));
    }
    for r in replays.iter().filter(|r| !r.info.peak_whole) {
        report.notices.push(format!(
            "episode {}: its end cuts the peak ({:.0}–{:.0} s) on the segment grid; \
             --align centred holds it",
            r.info.rank, r.info.peak_start_s, r.info.peak_end_s
        ));
    }
    let mut cpu = (0u64, 0u64);
    for r in &replays {
        let episode = replay_episode(r, options, &mut cpu, progress);
        report.episodes.push(episode);
    }
    report.client_us_per_offloaded_write =
        (cpu.1 > 0 && cpu.0 > 0).then(|| cpu.0 as f64 / 1000.0 / cpu.1 as f64);
    if options.parts.sensitivity {
        report.sensitivity = sensitivity(&replays, options, progress);
    }
    if options.parts.recovery {
        report.recovery = recovery(&replays, &report, options, progress);
        if report.recovery.is_none() {
            let offloaded = report
                .episodes
                .iter()
                .any(|e| e.configs.peak.offloaded_max_bytes > 0);
            report.notices.push(if offloaded {
                format!(
                    "no recovery run (Table 3): no sample (every {} s) held off-loaded data; a \
                     smaller --sample-s finds the moment to crash",
                    options.sample_ns as f64 / 1e9
                )
            } else {
                "no recovery run (Table 3): peak off-load off-loaded nothing in any episode, so a \
                 crash would have nothing to recover"
                    .into()
            });
        }
    }
    if options.parts.micro {
        report.micro = Some(micro(options, progress));
    }
    if options.parts.oltp {
        report.oltp = Some(oltp::oltp(options, progress));
    }
    if options.parts.worst_case {
        report.worst_case = Some(worst::worst_case(options, progress));
    }
    Ok(report)
}

/// One episode replayed under the baseline, always and peak off-load (and with NVRAM when
/// asked); the client's CPU per off-loaded write is added to `cpu` (ns, writes).
fn replay_episode(
    r: &Replay,
    options: &Options,
    cpu: &mut (u64, u64),
    progress: &mut dyn FnMut(&str),
) -> EpisodeReport {
    let run = |policy: Policy, nvram: bool, progress: &mut dyn FnMut(&str)| {
        progress(&format!(
            "episode {}: {} off-load{}",
            r.info.rank,
            policy_name(policy),
            if nvram { ", NVRAM" } else { "" }
        ));
        let mut setup = setup_for(r, options, policy);
        setup.time_client = policy == Policy::Peak && !nvram;
        if nvram {
            setup.nvram = Some(NvramParams {
                capacity_bytes: options.nvram_bytes / 3,
                write_fraction: options.nvram_write_fraction,
                latency_ms: 0.05,
                destage_depth_max: 8,
            });
        }
        let outcome = volumes::run(&setup);
        config_result(&outcome, r.duration_ns)
    };
    let baseline = run(Policy::Baseline, false, progress);
    let always = run(Policy::Always, false, progress);
    let peak = run(Policy::Peak, false, progress);
    if peak.offloaded_writes > 0 {
        // Runs that off-loaded nothing have no per-write cost to add.
        cpu.0 += peak.client_cpu_ns;
        cpu.1 += peak.offloaded_writes;
    }
    let nvram = options.parts.nvram.then(|| NvramResult {
        baseline: run(Policy::Baseline, true, progress),
        peak: run(Policy::Peak, true, progress),
    });
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let replayed = r.loads.iter().map(|l| l.len() as u64).sum::<u64>();
    let reads = r
        .loads
        .iter()
        .flatten()
        .filter(|q| q.op == Op::Read)
        .count() as u64;
    EpisodeReport {
        rank: r.info.rank,
        start_s: r.info.start_s,
        end_s: r.info.end_s,
        requests: r.info.requests,
        read_pct: r.info.read_pct,
        peak_rate_per_s: r.info.peak_rate_per_s,
        peak_start_s: r.info.peak_start_s,
        peak_end_s: r.info.peak_end_s,
        peak_whole: r.info.peak_whole,
        volumes: r.volumes.clone(),
        replayed_requests: replayed,
        replayed_read_pct: (replayed > 0).then(|| 100.0 * reads as f64 / replayed as f64),
        peak_speedup: ratio(baseline.mean_ms, peak.mean_ms),
        always_speedup: ratio(baseline.mean_ms, always.mean_ms),
        configs: Configs {
            baseline,
            always,
            peak,
        },
        nvram,
    }
}

/// Figure 6's sampling period for episodes up to `longest_ns`: 200 samples, in steps of the
/// driver's 100 ms tick, from 100 ms to 10 s.
pub fn auto_sample_ns(longest_ns: Nanos) -> Nanos {
    const TICK: Nanos = 100_000_000;
    (longest_ns / 200 / TICK * TICK).clamp(TICK, 100 * TICK)
}

fn policy_name(p: Policy) -> &'static str {
    match p {
        Policy::Baseline => "no",
        Policy::Always => "always",
        Policy::Peak => "peak",
        Policy::WhileBaseUnavailable => "while a replica is down",
    }
}

/// The three volumes of an episode on one server, each off-loading to the other two.
fn setup_for(r: &Replay, options: &Options, policy: Policy) -> Setup {
    let n = r.loads.len();
    let volumes = r
        .loads
        .iter()
        .enumerate()
        .map(|(i, load)| VolumeSpec {
            load: Load::Open(load.clone()),
            client: true,
            store: true,
            store_set: (0..n).filter(|&j| j != i).collect(),
        })
        .collect();
    Setup {
        policy,
        t_base: options.t_base,
        t_store: options.t_store,
        n_reclaim: options.n_reclaim,
        sample_ns: options.sample_ns,
        end_ns: r.duration_ns,
        seed: options.seed,
        device: options.device.clone(),
        array: options.array,
        ..Setup::everest(volumes)
    }
}

fn config_result(o: &Outcome, duration_ns: Nanos) -> ConfigResult {
    let mut reads = Histogram::new();
    let mut writes = Histogram::new();
    let mut all = Histogram::new();
    let mut r = ConfigResult {
        requests: 0,
        mean_ms: None,
        p99_ms: None,
        read_mean_ms: None,
        write_mean_ms: None,
        read_p99_ms: None,
        write_p99_ms: None,
        reads: Histogram::new().summary(),
        writes: Histogram::new().summary(),
        volume_mean_ms: Vec::new(),
        offloaded_writes: 0,
        offloaded_write_bytes: 0,
        reclaimed_bytes: 0,
        store_reads: 0,
        offloaded_bytes: Vec::new(),
        offloaded_max_bytes: 0,
        offloaded_mean_bytes: 0.0,
        last_answer_s: o.last_answer_ns as f64 / 1e9,
        offloaded_at_end_bytes: 0,
        client_us_per_offloaded_write: None,
        client_us_per_request: None,
        client_cpu_ns: 0,
    };
    let mut cpu_ns = 0;
    for v in &o.volumes {
        reads.merge(&v.reads);
        writes.merge(&v.writes);
        let mut both = v.reads.clone();
        both.merge(&v.writes);
        r.volume_mean_ms.push(both.mean_ns().map(|n| n / 1e6));
        all.merge(&both);
        cpu_ns += v.client_cpu_ns;
        if let Some(s) = v.client {
            r.offloaded_writes += s.offloaded_writes;
            r.offloaded_write_bytes += s.offloaded_write_bytes;
            r.reclaimed_bytes += s.reclaimed_bytes;
            r.store_reads += s.store_reads;
            r.offloaded_at_end_bytes += s.offloaded_bytes;
        }
        for (i, b) in v.offloaded.iter().enumerate() {
            if r.offloaded_bytes.len() <= i {
                r.offloaded_bytes.push(0);
            }
            r.offloaded_bytes[i] += b;
        }
    }
    r.requests = all.count();
    r.mean_ms = all.mean_ns().map(|n| n / 1e6);
    r.p99_ms = all.summary().p99_ms;
    r.reads = reads.summary();
    r.writes = writes.summary();
    r.read_mean_ms = r.reads.mean_ms;
    r.write_mean_ms = r.writes.mean_ms;
    r.read_p99_ms = r.reads.p99_ms;
    r.write_p99_ms = r.writes.p99_ms;
    r.offloaded_max_bytes = o.offloaded_peak_bytes;
    // The time-average over the episode (samples beyond it, while the backlog drains, excluded).
    let within = ((duration_ns / o.sample_ns.max(1)) as usize + 1).min(r.offloaded_bytes.len());
    if within > 0 {
        r.offloaded_mean_bytes =
            r.offloaded_bytes[..within].iter().sum::<u64>() as f64 / within as f64;
    }
    r.client_cpu_ns = cpu_ns;
    if cpu_ns > 0 {
        r.client_us_per_offloaded_write =
            (r.offloaded_writes > 0).then(|| cpu_ns as f64 / 1e3 / r.offloaded_writes as f64);
        r.client_us_per_request = (r.requests > 0).then(|| cpu_ns as f64 / 1e3 / r.requests as f64);
    }
    r
}

/// Peak episodes and their three volumes' requests.
fn episodes(
    open: &mut dyn FnMut() -> Result<Box<dyn RecordReader>, String>,
    options: &Options,
    progress: Progress,
) -> Result<Vec<Replay>, String> {
    progress("finding the peak episodes");
    let mut reader = open()?;
    let mut peaks = PeaksBuilder::new(options.peaks)?;
    let mut anchor = None;
    while let Some(record) = reader.next_record().map_err(|e| e.to_string())? {
        anchor.get_or_insert(record.time_ns);
        peaks.add(&record);
    }
    let report = peaks.finish(reader.volumes(), None);
    let anchor = anchor.unwrap_or(0);
    let names = reader.volumes().clone();
    let mut replays: Vec<Replay> = Vec::new();
    let mut wanted: Vec<(i64, i64, Vec<Option<usize>>)> = Vec::new();
    for e in &report.episodes {
        // Maximum, median and minimum request counts (Everest §4.1); fewer volumes are
        // replayed as they are, beside idle volumes, so every client has two stores.
        let vols = &e.volumes;
        let mut picks: Vec<usize> = match vols.len() {
            0 => Vec::new(),
            1 => vec![0],
            2 => vec![0, 1],
            n => vec![0, n / 2, n - 1],
        };
        picks.dedup();
        let mut ids: Vec<Option<usize>> = picks
            .iter()
            .map(|&p| names.lookup(&vols[p].volume).map(|v| v.index()))
            .collect();
        let mut infos: Vec<EpisodeVolumeInfo> = picks
            .iter()
            .map(|&p| EpisodeVolumeInfo {
                volume: vols[p].volume.clone(),
                requests: vols[p].requests,
                read_pct: vols[p].read_pct,
            })
            .collect();
        while ids.len() < 3 {
            ids.push(None);
            infos.push(EpisodeVolumeInfo {
                volume: "(idle)".into(),
                requests: 0,
                read_pct: None,
            });
        }
        let start = anchor + (e.start_s * 1e9) as i64;
        let end = anchor + (e.end_s * 1e9) as i64;
        wanted.push((start, end, ids));
        replays.push(Replay {
            info: e.clone(),
            volumes: infos,
            loads: vec![Vec::new(); 3],
            duration_ns: (end - start).max(0) as Nanos,
        });
    }
    progress("reading the episodes' requests");
    let mut reader = open()?;
    while let Some(record) = reader.next_record().map_err(|e| e.to_string())? {
        for (i, (start, end, ids)) in wanted.iter().enumerate() {
            if record.time_ns < *start || record.time_ns >= *end {
                continue;
            }
            if let Some(slot) = ids.iter().position(|v| *v == Some(record.volume.index())) {
                replays[i].loads[slot].push(IoReq {
                    at_ns: (record.time_ns - start) as Nanos,
                    op: record.op,
                    offset_bytes: record.offset_bytes,
                    length_bytes: record.length_bytes.max(1),
                });
            }
        }
    }
    for r in &mut replays {
        for load in &mut r.loads {
            // Traces ordered by completion may hold a request slightly out of order.
            load.sort_by_key(|q| q.at_ns);
        }
        // A short trace's episode ends with its last request.
        let last = r.loads.iter().flatten().map(|q| q.at_ns).max().unwrap_or(0);
        r.duration_ns = r.duration_ns.min(last + 1);
    }
    Ok(replays)
}

mod headlines;
mod parts;

pub use headlines::headlines;
use parts::{micro, recovery, sensitivity};

pub mod oltp;
pub mod worst;

/// Opens the lab's input again (it is read once for the peaks, once for the episodes).
pub type Opener = dyn FnMut() -> Result<Box<dyn cordillera_trace::RecordReader>, String>;

/// The lab's input for `seed`: the source's name and a function that opens it — the trace
/// (a `gen:` spec without a seed takes `seed`), or the Exchange-like workload of `seed`.
pub fn opener(
    trace: Option<&crate::input::TraceInput>,
    seed: u64,
) -> Result<(String, Box<Opener>), String> {
    Ok(match trace {
        Some(input) => {
            let spec = input.file.to_string_lossy();
            let mut input = input.clone();
            if let Some(seeded) = crate::input::seeded_spec(&spec, seed) {
                input.file = seeded.into();
            }
            (
                input.file.display().to_string(),
                Box::new(move || input.open().map_err(|e| format!("{e:#}"))),
            )
        }
        None => {
            let w = cordillera_sim::workload::ExchangeLike {
                seed,
                ..cordillera_sim::workload::ExchangeLike::everest()
            };
            w.validate()?;
            (
                format!("exchange-like (seed {seed})"),
                Box::new(move || {
                    Ok(Box::new(cordillera_sim::workload::Generated::new(
                        &w.volume_names(),
                        Box::new(w.records()),
                    ))
                        as Box<dyn cordillera_trace::RecordReader>)
                }),
            )
        }
    })
}
