//! Everest §4.2's worst case (Figure 10): two servers, each running the OLTP load on its own
//! disk. Machine 1 off-loads to a store on machine 2's disk; for the first 10 minutes only
//! machine 1 is busy, then machine 2 starts too. Machine 1 stops off-loading fresh data (the
//! store's disk is loaded now) but still reads what it off-loaded from that contended disk,
//! which machine 2's own load also needs. The paper: after machine 2 starts, machine 1 runs at
//! 93 % of its baseline and machine 2 at 59 %. Its remedy, a bound on what a client keeps
//! off-loaded ([`Config::offload_bytes_max`]), runs beside it.

use super::oltp::{oltp_load, OltpShape};
use super::*;

/// One configuration of the worst case: each machine's throughput over the baseline (one
/// machine alone, no off-load), before machine 2 starts and after.
#[derive(Clone, Debug, Serialize)]
pub struct WorstRow {
    pub config: String,
    /// The client's bound, bytes (`None`: no bound).
    pub bound_bytes: Option<u64>,
    /// What machine 1 had off-loaded when machine 2 started.
    pub offloaded_at_start_bytes: u64,
    /// Its share of the OLTP span (the paper: 936 MB, 13 % of the database).
    pub offloaded_share: f64,
    pub machine1_before: f64,
    pub machine1_after: f64,
    pub machine2_after: f64,
    /// Machine 1's reads served by the store on machine 2's disk after it started, and all of
    /// its reads then.
    pub machine1_store_reads_after: u64,
    pub machine1_reads_after: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct WorstCase {
    pub before_s: u64,
    pub after_s: u64,
    pub baseline_iops: f64,
    pub rows: Vec<WorstRow>,
    /// The paper's figures, as it states them.
    pub paper: String,
}

/// Runs the worst case without a bound and with `options.worst_bound_bytes`.
pub(super) fn worst_case(options: &Options, progress: Progress) -> WorstCase {
    let (before_ns, after_ns) = (
        options.worst_before_s * 1_000_000_000,
        options.worst_after_s * 1_000_000_000,
    );
    let shape = OltpShape::of(options);
    let setup =
        |volumes: Vec<VolumeSpec>, policy: Policy, end_ns: Nanos, bound: Option<u64>| Setup {
            array: None,
            policy,
            t_base: options.t_base,
            t_store: options.t_store,
            n_reclaim: options.n_reclaim,
            sample_ns: 1_000_000_000,
            end_ns,
            stop_ns: end_ns,
            offload_bytes_max: bound,
            seed: options.seed,
            ..Setup::everest(volumes)
        };
    progress("worst case (§4.2, Figure 10): the baseline");
    let baseline_s = options.micro_s.max(1);
    let alone = VolumeSpec {
        load: oltp_load(&shape, 0, baseline_s * 1_000_000_000),
        client: true,
        store: false,
        store_set: vec![],
    };
    let base = volumes::run(&setup(
        vec![alone],
        Policy::Baseline,
        baseline_s * 1_000_000_000,
        None,
    ));
    let baseline_iops = base.volumes[0].answered as f64 / baseline_s as f64;
    let mut rows = Vec::new();
    for bound in [None, Some(options.worst_bound_bytes)] {
        let config = match bound {
            None => "no bound".to_string(),
            Some(b) => format!("bound {} MiB", b >> 20),
        };
        progress(&format!("worst case (§4.2, Figure 10): {config}"));
        let end_ns = before_ns + after_ns;
        let machines = vec![
            VolumeSpec {
                load: oltp_load(&shape, 0, end_ns),
                client: true,
                store: false,
                store_set: vec![1],
            },
            VolumeSpec {
                load: oltp_load(&shape, before_ns, end_ns),
                client: true,
                store: true,
                store_set: vec![],
            },
        ];
        let o = volumes::run(&setup(machines, Policy::Peak, end_ns, bound));
        let at = |v: usize, s: u64| -> u64 {
            let samples = &o.volumes[v].answered_samples;
            samples[(s as usize).min(samples.len() - 1)]
        };
        let (b, e) = (
            options.worst_before_s,
            options.worst_before_s + options.worst_after_s,
        );
        let rate = |v: usize, from: u64, to: u64| {
            (at(v, to) - at(v, from)) as f64 / (to - from) as f64 / baseline_iops
        };
        let reads = |s: u64| -> (u64, u64) {
            let samples = &o.volumes[0].read_samples;
            samples[(s as usize).min(samples.len() - 1)]
        };
        let offloaded = o.volumes[0].offloaded.get(b as usize).copied().unwrap_or(0);
        rows.push(WorstRow {
            config,
            bound_bytes: bound,
            offloaded_at_start_bytes: offloaded,
            offloaded_share: offloaded as f64 / shape.span_bytes as f64,
            machine1_before: rate(0, 0, b),
            machine1_after: rate(0, b, e),
            machine2_after: rate(1, b, e),
            machine1_store_reads_after: reads(e).0 - reads(b).0,
            machine1_reads_after: (reads(e).0 + reads(e).1) - (reads(b).0 + reads(b).1),
        });
    }
    WorstCase {
        before_s: options.worst_before_s,
        after_s: options.worst_after_s,
        baseline_iops,
        rows,
        paper: "after machine 2 starts: machine 1 at 93 % of its baseline, machine 2 at 59 % \
                (936 MB, 13 % of the database, off-loaded in the first 10 min); no bound"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worst case's directions, on shorter phases (60 s each): machine 1 off-loads and runs
    /// above its baseline while alone; once machine 2 starts, machine 2 runs below its baseline
    /// (its disk also serves machine 1's reads of off-loaded data), and with the bound machine
    /// 1 had off-loaded at most the bound, so machine 2 loses less.
    #[test]
    fn the_contended_disk_costs_machine_2_and_the_bound_limits_it() {
        let options = Options {
            worst_before_s: 60,
            worst_after_s: 60,
            worst_bound_bytes: 16 * MIB,
            micro_s: 10,
            ..Options::default()
        };
        let mut progress = |_: &str| {};
        let w = worst_case(&options, &mut progress);
        println!("{w:#?}");
        let (free, bounded) = (&w.rows[0], &w.rows[1]);
        assert!(free.machine1_before > 1.2, "{free:?}");
        assert!(free.machine2_after < 0.95, "{free:?}");
        assert!(free.machine1_store_reads_after > 0, "{free:?}");
        assert!(bounded.offloaded_at_start_bytes <= 16 * MIB, "{bounded:?}");
        assert!(free.offloaded_at_start_bytes > 16 * MIB, "{free:?}");
        assert!(bounded.machine2_after > free.machine2_after, "{w:?}");
    }
}
