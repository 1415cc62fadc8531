//! The parts beyond Figures 5 and 6: sensitivity (Figure 7), worst-case recovery (Table 3)
//! and the §4.3 micro-benchmarks (Figure 13).

use super::*;

/// Figure 7: one parameter varied at a time, the others at their defaults; peak off-load.
pub(super) fn sensitivity(
    replays: &[Replay],
    options: &Options,
    progress: Progress,
) -> Vec<SensitivityPoint> {
    let mut points = Vec::new();
    let mut variants: Vec<(&'static str, u64, Options)> = Vec::new();
    for &v in &options.t_base_values {
        variants.push((
            "t_base",
            v,
            Options {
                t_base: v,
                ..options.clone()
            },
        ));
    }
    for &v in &options.t_store_values {
        variants.push((
            "t_store",
            v,
            Options {
                t_store: v,
                ..options.clone()
            },
        ));
    }
    for &v in &options.n_reclaim_values {
        variants.push((
            "n_reclaim",
            v as u64,
            Options {
                n_reclaim: v,
                ..options.clone()
            },
        ));
    }
    for (parameter, value, o) in variants {
        progress(&format!("sensitivity: {parameter} = {value}"));
        let mut all = Histogram::new();
        let mut offloaded = 0.0;
        let (mut reads, mut store_reads) = (0u64, 0u64);
        for r in replays {
            let outcome = volumes::run(&setup_for(r, &o, Policy::Peak));
            let c = config_result(&outcome, r.duration_ns);
            for v in &outcome.volumes {
                all.merge(&v.reads);
                all.merge(&v.writes);
                reads += v.reads.count();
            }
            store_reads += c.store_reads;
            offloaded += c.offloaded_mean_bytes;
        }
        points.push(SensitivityPoint {
            parameter,
            value,
            mean_ms: all.mean_ns().map(|n| n / 1e6),
            offloaded_mean_mb: offloaded / replays.len() as f64 / MIB as f64,
            offloaded_read_pct: if reads > 0 {
                100.0 * store_reads as f64 / reads as f64
            } else {
                0.0
            },
        });
    }
    points
}

/// Table 3: the server crashes when the off-loaded data is largest (in the episode where it is
/// largest), and every store and client recovers.
pub(super) fn recovery(
    replays: &[Replay],
    report: &Report,
    options: &Options,
    progress: Progress,
) -> Option<RecoveryReport> {
    let (index, at_sample) = report
        .episodes
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let o = &e.configs.peak.offloaded_bytes;
            let (k, max) = o
                .iter()
                .enumerate()
                .max_by_key(|(k, b)| (**b, usize::MAX - k))?;
            (*max > 0).then_some((i, k, *max))
        })
        .max_by_key(|&(_, _, max)| max)
        .map(|(i, k, _)| (i, k))?;
    let r = &replays[index];
    let crash_at = at_sample as Nanos * options.sample_ns;
    progress(&format!(
        "recovery: crash in episode {} at {} s",
        r.info.rank,
        crash_at / 1_000_000_000
    ));
    let mut setup = setup_for(r, options, Policy::Peak);
    setup.crash_at = Some(crash_at.max(1_000_000_000));
    setup.end_ns = 0;
    let o = volumes::run(&setup);
    let mut rec = RecoveryReport {
        episode: r.info.rank,
        crash_at_s: crash_at as f64 / 1e9,
        max_log_bytes: 0,
        max_log_records: 0,
        max_valid_bytes: 0,
        max_store_recovery_s: 0.0,
        max_client_recovery_s: 0.0,
        metadata_bytes: 0,
    };
    for v in &o.volumes {
        if let Some(s) = v.store_stats {
            rec.max_log_bytes = rec.max_log_bytes.max(s.bytes_scanned);
            rec.max_log_records = rec.max_log_records.max(s.records_scanned);
            rec.max_valid_bytes = rec.max_valid_bytes.max(s.valid_data_bytes);
        }
        rec.max_store_recovery_s = rec
            .max_store_recovery_s
            .max(v.store_recovery_ns.unwrap_or(0) as f64 / 1e9);
        rec.max_client_recovery_s = rec
            .max_client_recovery_s
            .max(v.client_recovery_ns.unwrap_or(0) as f64 / 1e9);
        rec.metadata_bytes += v.metadata_bytes;
    }
    Some(rec)
}

/// §4.3: a client on one Cheetah disk, stores on one Cheetah disk each, 64 KiB requests.
pub(super) fn micro(options: &Options, progress: Progress) -> Micro {
    let run_ns = options.micro_s * 1_000_000_000;
    let depth = options.micro_depth;
    let bytes = 64 * KIB;
    let closed = |read_fraction: f64, sequential: bool, until_ns: Nanos| Load::Closed {
        depth,
        read_fraction,
        sequential,
        request_bytes: bytes,
        span_bytes: 64 << 30,
        from_ns: 0,
        until_ns,
        hot: None,
    };
    let single = |load: Load, stores: usize, policy: Policy| {
        let mut volumes = vec![VolumeSpec {
            load,
            client: true,
            store: false,
            store_set: (1..=stores).collect(),
        }];
        for _ in 0..stores {
            volumes.push(VolumeSpec {
                load: Load::Idle,
                client: false,
                store: true,
                store_set: Vec::new(),
            });
        }
        Setup {
            array: None,
            policy,
            t_base: options.t_base,
            t_store: options.t_store,
            n_reclaim: options.n_reclaim,
            sample_ns: 100_000_000,
            end_ns: run_ns,
            seed: options.seed,
            ..Setup::everest(volumes)
        }
    };
    let mb_per_s = |o: &Outcome| o.volumes[0].bytes_done as f64 / 1e6 / (run_ns as f64 / 1e9);
    let mut m = Micro {
        read_ratio: Vec::new(),
        reclaim_random: Vec::new(),
        reclaim_streaming: Vec::new(),
        stores: Vec::new(),
    };
    for read_pct in [0u32, 25, 50, 75, 100] {
        progress(&format!("micro-benchmark: {read_pct} % reads"));
        let f = read_pct as f64 / 100.0;
        let off = volumes::run(&single(closed(f, false, run_ns), 1, Policy::Always));
        let base = volumes::run(&single(closed(f, false, run_ns), 1, Policy::Baseline));
        m.read_ratio.push(MicroPoint {
            x: read_pct as f64,
            offload_mb_per_s: mb_per_s(&off),
            baseline_mb_per_s: Some(mb_per_s(&base)),
        });
    }
    // Reclaim: off-load for a quarter of the run, then reclaim with nothing else to do.
    let fill_ns = run_ns / 4;
    for sequential in [false, true] {
        for n in [1usize, 4, 16, 64, 256] {
            progress(&format!(
                "micro-benchmark: reclaim {} writes, N_reclaim = {n}",
                if sequential { "streaming" } else { "random" }
            ));
            let mut setup = single(closed(0.0, sequential, fill_ns), 1, Policy::Always);
            setup.n_reclaim = n;
            setup.switch_policy = Some((fill_ns, Policy::Peak));
            setup.end_ns = fill_ns;
            setup.stop_ns = fill_ns + 3600 * 1_000_000_000;
            setup.until_reclaimed = true;
            let o = volumes::run(&setup);
            let v = &o.volumes[0];
            let reclaimed = v.client.map_or(0, |s| s.reclaimed_bytes);
            // The first sample after the switch with nothing left off-loaded.
            let first = (fill_ns / setup.sample_ns) as usize;
            let done = v.offloaded[first.min(v.offloaded.len())..]
                .iter()
                .position(|&b| b == 0)
                .map(|k| (k as u64).max(1) * setup.sample_ns);
            let point = MicroPoint {
                x: n as f64,
                offload_mb_per_s: done.map_or(0.0, |ns| reclaimed as f64 / 1e6 / (ns as f64 / 1e9)),
                baseline_mb_per_s: None,
            };
            if sequential {
                m.reclaim_streaming.push(point);
            } else {
                m.reclaim_random.push(point);
            }
        }
    }
    let base = volumes::run(&single(closed(0.0, false, run_ns), 1, Policy::Baseline));
    for stores in 1..=3 {
        progress(&format!("micro-benchmark: {stores} stores"));
        let off = volumes::run(&single(closed(0.0, false, run_ns), stores, Policy::Always));
        m.stores.push(MicroPoint {
            x: stores as f64,
            offload_mb_per_s: mb_per_s(&off),
            baseline_mb_per_s: Some(mb_per_s(&base)),
        });
    }
    m
}
