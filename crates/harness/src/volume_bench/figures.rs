//! What a run of the volume bench reports: the figures (its JSON) and their table.

use super::*;

#[derive(Serialize, Default)]
pub(super) struct Figures {
    pub(super) randwrite_4k_iops_volume: f64,
    pub(super) randwrite_4k_iops_nbdkit: f64,
    pub(super) randwrite_4k_ratio: f64,
    pub(super) seqwrite_1m_mb_per_s_volume: f64,
    pub(super) seqwrite_1m_mb_per_s_nbdkit: f64,
    pub(super) seqwrite_1m_ratio: f64,
    pub(super) randread_4k_iops_volume: f64,
    pub(super) randread_4k_iops_nbdkit: f64,
    pub(super) randread_4k_ratio: f64,
    pub(super) randrw_70_30_4k_iops_volume: f64,
    pub(super) randrw_70_30_4k_iops_nbdkit: f64,
    pub(super) randrw_70_30_4k_ratio: f64,
    pub(super) seqread_1m_mb_per_s_volume: f64,
    pub(super) seqread_1m_mb_per_s_nbdkit: f64,
    pub(super) seqread_1m_ratio: f64,
    /// The volume whose data sits partly on a store (ratios against the same round's nbdkit).
    pub(super) partly_offloaded_randread_4k_iops: f64,
    pub(super) partly_offloaded_randread_4k_ratio: f64,
    pub(super) partly_offloaded_randrw_70_30_4k_iops: f64,
    pub(super) partly_offloaded_randrw_70_30_4k_ratio: f64,
    pub(super) partly_offloaded_seqread_1m_mb_per_s: f64,
    pub(super) partly_offloaded_seqread_1m_ratio: f64,
    /// The 70/30 mix on nbdkit with every write durable before its reply (median, and per
    /// round), and the partly off-loaded mix (every write off-loaded, acknowledged once the
    /// store's log is durable) against it.
    pub(super) randrw_70_30_4k_iops_nbdkit_durable: f64,
    pub(super) rounds_randrw_70_30_4k_iops_nbdkit_durable: Vec<f64>,
    pub(super) partly_offloaded_randrw_70_30_4k_durable_ratio: f64,
    pub(super) rounds_partly_offloaded_randrw_70_30_4k_durable_ratio: Vec<f64>,
    /// Bytes of the region whose latest data is on the store when the reads start ÷ region.
    pub(super) partly_offloaded_fraction_of_region: f64,
    /// The partly off-loaded volume's 70/30 mix after a restart with `--policy baseline`,
    /// against the same round's nbdkit mix.
    pub(super) partly_offloaded_randrw_70_30_4k_baseline_policy_iops: f64,
    pub(super) partly_offloaded_randrw_70_30_4k_baseline_policy_ratio: f64,
    pub(super) rounds_partly_offloaded_randrw_70_30_4k_baseline_policy_ratio: Vec<f64>,
    /// Per round, bytes of the region whose latest data is on the store when that mix starts
    /// ÷ region.
    pub(super) partly_offloaded_baseline_policy_fraction_of_region: Vec<f64>,
    /// Per round, the fraction of that mix's writes off-loaded all the same (over blocks
    /// whose latest data is on the store).
    pub(super) partly_offloaded_baseline_policy_mix_offloaded_writes: Vec<f64>,
    pub(super) emulated_randwrite_64k_iops_offload: f64,
    pub(super) emulated_randwrite_64k_iops_baseline: f64,
    pub(super) emulated_randwrite_64k_ratio: f64,
    pub(super) emulated_offloaded_write_fraction: f64,
    /// Each round's ratio (volume ÷ nbdkit, off-load ÷ none), for the spread behind the medians.
    pub(super) rounds_4k_ratio: Vec<f64>,
    pub(super) rounds_1m_ratio: Vec<f64>,
    pub(super) rounds_emulated_ratio: Vec<f64>,
    pub(super) rounds_randread_4k_ratio: Vec<f64>,
    pub(super) rounds_randrw_70_30_4k_ratio: Vec<f64>,
    pub(super) rounds_seqread_1m_ratio: Vec<f64>,
    /// The write loads' figures per round (IOPS; MB/s), for which server a ratio moved with.
    pub(super) rounds_randwrite_4k_iops_volume: Vec<f64>,
    pub(super) rounds_randwrite_4k_iops_nbdkit: Vec<f64>,
    pub(super) rounds_seqwrite_1m_mb_per_s_volume: Vec<f64>,
    pub(super) rounds_seqwrite_1m_mb_per_s_nbdkit: Vec<f64>,
    pub(super) rounds_partly_offloaded_randread_4k_ratio: Vec<f64>,
    pub(super) rounds_partly_offloaded_randrw_70_30_4k_ratio: Vec<f64>,
    pub(super) rounds_partly_offloaded_seqread_1m_ratio: Vec<f64>,
    /// Each read load's figures per round (IOPS, or MB/s for 1 MiB reads): nbdkit, the plain
    /// volume and the partly off-loaded volume, the last always measured after the other two.
    pub(super) rounds_reads: Vec<LoadRounds>,
    /// Per round, whether nbdkit ran before the plain volume (they alternate).
    pub(super) rounds_nbdkit_first: Vec<bool>,
    /// Whether the servers ran on CPU 1 and fio on CPU 0 (not `--no-pin`, two CPUs or more).
    pub(super) pinned: bool,
}

/// One load's figures per round.
#[derive(Serialize, Default)]
pub(super) struct LoadRounds {
    pub(super) load: &'static str,
    pub(super) nbdkit: Vec<f64>,
    pub(super) volume: Vec<f64>,
    pub(super) partly_offloaded: Vec<f64>,
    pub(super) cpu_us_per_request: CpuRounds,
}

/// One read load's CPU per round: each server's µs of CPU per request (user and system, all
/// its threads, from `/proc/PID/stat`, over fio's run ÷ the requests fio counted), and fio's
/// own CPU as a share of one CPU (near 1.0: the client, not the server, set the pace).
#[derive(Serialize, Default, Clone)]
pub(super) struct CpuRounds {
    pub(super) nbdkit: Vec<f64>,
    pub(super) volume: Vec<f64>,
    /// The partly off-loaded volume's server and its store's.
    pub(super) partly_volume: Vec<f64>,
    pub(super) partly_store: Vec<f64>,
    pub(super) nbdkit_fio: Vec<f64>,
    pub(super) volume_fio: Vec<f64>,
    pub(super) partly_fio: Vec<f64>,
}

impl CpuRounds {
    /// Per round, nbdkit's CPU per request ÷ the plain volume's, and ÷ the partly off-loaded
    /// volume's and its store's together: on one CPU shared by the servers, what each could
    /// serve at most against nbdkit.
    pub(super) fn ratios(&self) -> (Vec<f64>, Vec<f64>) {
        let partly: Vec<f64> = self
            .partly_volume
            .iter()
            .zip(&self.partly_store)
            .map(|(v, s)| v + s)
            .collect();
        (
            ratios(&self.nbdkit, &self.volume),
            ratios(&self.nbdkit, &partly),
        )
    }
}

impl Figures {
    /// Each ratio as the median of its rounds' ratios.
    pub(super) fn take_medians(&mut self) {
        // The ratio is the median of each round's ratio: the two runs of a round are measured
        // back to back, so a slow spell of the machine weighs on both.
        self.randwrite_4k_ratio = median(self.rounds_4k_ratio.clone());
        self.seqwrite_1m_ratio = median(self.rounds_1m_ratio.clone());
        self.emulated_randwrite_64k_ratio = median(self.rounds_emulated_ratio.clone());
        self.randread_4k_ratio = median(self.rounds_randread_4k_ratio.clone());
        self.randrw_70_30_4k_ratio = median(self.rounds_randrw_70_30_4k_ratio.clone());
        self.seqread_1m_ratio = median(self.rounds_seqread_1m_ratio.clone());
        self.partly_offloaded_randread_4k_ratio =
            median(self.rounds_partly_offloaded_randread_4k_ratio.clone());
        self.partly_offloaded_randrw_70_30_4k_ratio =
            median(self.rounds_partly_offloaded_randrw_70_30_4k_ratio.clone());
        self.partly_offloaded_seqread_1m_ratio =
            median(self.rounds_partly_offloaded_seqread_1m_ratio.clone());
        self.partly_offloaded_randrw_70_30_4k_durable_ratio = median(
            self.rounds_partly_offloaded_randrw_70_30_4k_durable_ratio
                .clone(),
        );
        self.partly_offloaded_randrw_70_30_4k_baseline_policy_ratio = median(
            self.rounds_partly_offloaded_randrw_70_30_4k_baseline_policy_ratio
                .clone(),
        );
    }
}

fn spread(ratios: &[f64]) -> String {
    let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    format!("rounds {}", each.join(" "))
}

/// The figures as a table: the volume against nbdkit for each load, with each round's ratio.
pub(super) fn print_figures(f: &Figures, s: u64, rounds: usize, region: u64) {
    println!(
        "volume bench: {s} s per run, {rounds} round(s); figures are medians, ratios the median of the rounds' ratios (a write load's figure in a round: the mean of two runs, first, second, second, first); region {region} bytes; {}",
        if f.pinned {
            "servers on CPU 1, fio on CPU 0"
        } else {
            "fio and the servers where the scheduler puts them"
        }
    );
    let line = |what: &str, unit: &str, v: f64, k: f64, ratio: f64, target: &str, r: &[f64]| {
        println!(
            "  {what:<42} volume {v:>9.0} {unit:<4}  nbdkit file {k:>9.0} {unit:<4}  ratio {ratio:.2} ({target}{})",
            spread(r)
        );
    };
    line(
        "4 KiB random write, depth 32:",
        "IOPS",
        f.randwrite_4k_iops_volume,
        f.randwrite_4k_iops_nbdkit,
        f.randwrite_4k_ratio,
        "target ≥ 1.0; ",
        &f.rounds_4k_ratio,
    );
    line(
        "1 MiB sequential write, depth 8:",
        "MB/s",
        f.seqwrite_1m_mb_per_s_volume,
        f.seqwrite_1m_mb_per_s_nbdkit,
        f.seqwrite_1m_ratio,
        "target ≥ 0.9; ",
        &f.rounds_1m_ratio,
    );
    line(
        "4 KiB random read, depth 32:",
        "IOPS",
        f.randread_4k_iops_volume,
        f.randread_4k_iops_nbdkit,
        f.randread_4k_ratio,
        "target ≥ 1.0; ",
        &f.rounds_randread_4k_ratio,
    );
    line(
        "4 KiB random 70/30 read/write, depth 32:",
        "IOPS",
        f.randrw_70_30_4k_iops_volume,
        f.randrw_70_30_4k_iops_nbdkit,
        f.randrw_70_30_4k_ratio,
        "",
        &f.rounds_randrw_70_30_4k_ratio,
    );
    line(
        "1 MiB sequential read, depth 8:",
        "MB/s",
        f.seqread_1m_mb_per_s_volume,
        f.seqread_1m_mb_per_s_nbdkit,
        f.seqread_1m_ratio,
        "",
        &f.rounds_seqread_1m_ratio,
    );
    println!(
        "  a volume with {:.1} % of its region's bytes on a store (random 4 KiB writes, --policy always):",
        f.partly_offloaded_fraction_of_region * 100.0
    );
    line(
        "  4 KiB random read, depth 32:",
        "IOPS",
        f.partly_offloaded_randread_4k_iops,
        f.randread_4k_iops_nbdkit,
        f.partly_offloaded_randread_4k_ratio,
        "",
        &f.rounds_partly_offloaded_randread_4k_ratio,
    );
    line(
        "  4 KiB random 70/30 read/write, depth 32:",
        "IOPS",
        f.partly_offloaded_randrw_70_30_4k_iops,
        f.randrw_70_30_4k_iops_nbdkit,
        f.partly_offloaded_randrw_70_30_4k_ratio,
        "",
        &f.rounds_partly_offloaded_randrw_70_30_4k_ratio,
    );
    println!(
        "  {:<42} volume {:>9.0} IOPS  nbdkit file, every write durable {:>9.0} IOPS  ratio {:.2} ({})",
        "  the same 70/30 mix (its writes durable):",
        f.partly_offloaded_randrw_70_30_4k_iops,
        f.randrw_70_30_4k_iops_nbdkit_durable,
        f.partly_offloaded_randrw_70_30_4k_durable_ratio,
        spread(&f.rounds_partly_offloaded_randrw_70_30_4k_durable_ratio)
    );
    line(
        "  1 MiB sequential read, depth 8:",
        "MB/s",
        f.partly_offloaded_seqread_1m_mb_per_s,
        f.seqread_1m_mb_per_s_nbdkit,
        f.partly_offloaded_seqread_1m_ratio,
        "",
        &f.rounds_partly_offloaded_seqread_1m_ratio,
    );
    let percents = |shares: &[f64]| {
        shares
            .iter()
            .map(|w| format!("{:.0} %", w * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "  the same volume restarted with --policy baseline ({} of the region on the store; writes over it still off-loaded: {} of them):",
        percents(&f.partly_offloaded_baseline_policy_fraction_of_region),
        percents(&f.partly_offloaded_baseline_policy_mix_offloaded_writes)
    );
    line(
        "  4 KiB random 70/30 read/write, depth 32:",
        "IOPS",
        f.partly_offloaded_randrw_70_30_4k_baseline_policy_iops,
        f.randrw_70_30_4k_iops_nbdkit,
        f.partly_offloaded_randrw_70_30_4k_baseline_policy_ratio,
        "",
        &f.rounds_partly_offloaded_randrw_70_30_4k_baseline_policy_ratio,
    );
    println!(
        "  emulated cheetah-15k, 64 KiB random write, depth 32: off-load {:>6.0} IOPS ({:.0} % of writes off-loaded)   no off-load {:>6.0} IOPS   ratio {:.2} (target ≥ 2.5; {})",
        f.emulated_randwrite_64k_iops_offload,
        f.emulated_offloaded_write_fraction * 100.0,
        f.emulated_randwrite_64k_iops_baseline,
        f.emulated_randwrite_64k_ratio,
        spread(&f.rounds_emulated_ratio)
    );
    print_cpu(f);
}

/// Each read load's CPU per request: nbdkit's, the plain volume's, the partly off-loaded
/// volume's and its store's, with fio's own share of a CPU; and nbdkit's ÷ ours.
fn print_cpu(f: &Figures) {
    println!(
        "  server CPU per request (µs, user and system, medians; fio's CPU as a share of one CPU), nbdkit's ÷ ours:"
    );
    for r in &f.rounds_reads {
        let c = &r.cpu_us_per_request;
        let (plain, partly) = c.ratios();
        let m = |xs: &Vec<f64>| median(xs.clone());
        println!(
            "    {:<40} nbdkit {:>6.1} (fio {:.2})  volume {:>6.1} (fio {:.2}) {:.2}  partly: volume {:>6.1} + store {:>6.1} (fio {:.2}) {:.2} ({})",
            format!("{}:", r.load),
            m(&c.nbdkit),
            m(&c.nbdkit_fio),
            m(&c.volume),
            m(&c.volume_fio),
            median(plain),
            m(&c.partly_volume),
            m(&c.partly_store),
            m(&c.partly_fio),
            median(partly.clone()),
            spread(&partly)
        );
    }
}
