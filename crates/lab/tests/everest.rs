//! The Everest lab on small workloads: off-loading must cut response times under an overload
//! and leave nothing off-loaded after peak off-load, and the experiment must run end to end on
//! a generated trace and on the real fragments in `../shared/traces/`.

use cordillera_lab::everest::{self, Options, Parts};
use cordillera_lab::volumes::{self, IoReq, Load, Setup, VolumeSpec};
use cordillera_offload::client::Policy;
use cordillera_sim::rng::SimRng;
use cordillera_sim::workload::{ExchangeLike, ExchangePeak, Generated};
use cordillera_trace::{open, ReadOptions, RecordReader};
use cordillera_types::Op;

const S: u64 = 1_000_000_000;

/// Poisson arrivals of 8 KiB requests at `rate` per second over `[from, until)` seconds.
fn poisson(rng: &mut SimRng, rate: f64, from: u64, until: u64, reads: f64) -> Vec<IoReq> {
    let mut out = Vec::new();
    for second in from..until {
        for _ in 0..rng.poisson(rate) {
            out.push(IoReq {
                at_ns: second * S + rng.below(S),
                op: if rng.chance(reads) {
                    Op::Read
                } else {
                    Op::Write
                },
                offset_bytes: rng.below(1 << 25) * 8192,
                length_bytes: 8192,
            });
        }
    }
    out.sort_by_key(|q| q.at_ns);
    out
}

/// Three volumes: one overloaded for 20 s (2,800 random 8 KiB requests/s over 256 GiB, 27 %
/// reads, beyond the ~2,100/s a RAID-0 of four Cheetah 15K disks serves), two lightly loaded;
/// then 40 s of light load everywhere.
fn burst() -> Vec<VolumeSpec> {
    let mut rng = SimRng::new(7, 1);
    let mut hot = poisson(&mut rng, 2800.0, 0, 20, 0.27);
    hot.extend(poisson(&mut rng, 20.0, 20, 60, 0.6));
    let loads = [
        hot,
        poisson(&mut rng, 30.0, 0, 60, 0.6),
        poisson(&mut rng, 30.0, 0, 60, 0.6),
    ];
    loads
        .into_iter()
        .enumerate()
        .map(|(i, requests)| VolumeSpec {
            load: Load::Open(requests),
            client: true,
            store: true,
            store_set: (0..3).filter(|&j| j != i).collect(),
        })
        .collect()
}

fn mean_ms(o: &volumes::Outcome) -> f64 {
    let (mut sum, mut n) = (0.0, 0u64);
    for v in &o.volumes {
        for h in [&v.reads, &v.writes] {
            sum += h.mean_ns().unwrap_or(0.0) * h.count() as f64;
            n += h.count();
        }
    }
    sum / n as f64 / 1e6
}

#[test]
fn peak_off_load_cuts_an_overload_and_reclaims_everything() {
    let run = |policy| {
        let setup = Setup {
            policy,
            end_ns: 60 * S,
            sample_ns: S,
            ..Setup::everest(burst())
        };
        volumes::run(&setup)
    };
    let baseline = run(Policy::Baseline);
    let peak = run(Policy::Peak);
    let always = run(Policy::Always);
    for (name, o) in [
        ("baseline", &baseline),
        ("peak", &peak),
        ("always", &always),
    ] {
        let issued: u64 = o.volumes.iter().map(|v| v.issued).sum();
        let answered: u64 = o.volumes.iter().map(|v| v.answered).sum();
        let errors: u64 = o.volumes.iter().map(|v| v.errors).sum();
        assert!(issued > 50_000, "{name}: {issued} requests issued");
        assert_eq!(issued, answered, "{name}: every request is answered");
        assert_eq!(errors, 0, "{name}: no request fails");
    }
    let (b, p, a) = (mean_ms(&baseline), mean_ms(&peak), mean_ms(&always));
    println!("mean response time: baseline {b:.1} ms, peak off-load {p:.1} ms, always {a:.1} ms");
    assert!(
        b > 10.0 * p,
        "peak off-load cuts the mean ≥ 10×: {b:.1} vs {p:.1} ms"
    );
    assert!(
        a < b,
        "always off-load beats the baseline: {a:.1} vs {b:.1} ms"
    );
    let stats = |o: &volumes::Outcome| {
        o.volumes
            .iter()
            .map(|v| v.client.expect("every volume has a client"))
            .collect::<Vec<_>>()
    };
    // Peak off-load: data went to the stores during the burst and came back after it.
    let offloaded: u64 = stats(&peak).iter().map(|s| s.offloaded_write_bytes).sum();
    let reclaimed: u64 = stats(&peak).iter().map(|s| s.reclaimed_bytes).sum();
    let left: u64 = stats(&peak).iter().map(|s| s.offloaded_bytes).sum();
    assert!(
        offloaded > 10 << 20,
        "peak off-load moved {offloaded} bytes"
    );
    assert_eq!(
        left, 0,
        "everything off-loaded is reclaimed once the burst is over"
    );
    assert!(reclaimed > 0 && reclaimed <= offloaded);
    assert!(peak.volumes[0].offloaded.iter().any(|&b| b > 0));
    // Always off-load never reclaims; the baseline never off-loads.
    assert!(
        stats(&always)
            .iter()
            .map(|s| s.offloaded_bytes)
            .sum::<u64>()
            > 0
    );
    assert!(stats(&always).iter().all(|s| s.reclaimed_bytes == 0));
    assert!(stats(&baseline).iter().all(|s| s.offloaded_writes == 0));
}

#[test]
fn reclaim_after_a_policy_switch_empties_the_store() {
    // §4.3's reclaim benchmark in small: always off-load for 2 s, then peak off-load reclaims.
    let volumes = vec![
        VolumeSpec {
            load: Load::Closed {
                depth: 16,
                read_fraction: 0.0,
                sequential: false,
                request_bytes: 65536,
                span_bytes: 1 << 30,
                from_ns: 0,
                until_ns: 2 * S,
                hot: None,
            },
            client: true,
            store: false,
            store_set: vec![1],
        },
        VolumeSpec {
            load: Load::Idle,
            client: false,
            store: true,
            store_set: Vec::new(),
        },
    ];
    let setup = Setup {
        array: None,
        policy: Policy::Always,
        switch_policy: Some((2 * S, Policy::Peak)),
        until_reclaimed: true,
        end_ns: 2 * S,
        stop_ns: 600 * S,
        sample_ns: 100_000_000,
        ..Setup::everest(volumes)
    };
    let o = volumes::run(&setup);
    let s = o.volumes[0].client.expect("a client");
    assert!(s.offloaded_writes > 100, "{s:?}");
    assert_eq!(
        s.base_writes, 0,
        "every write went to the store before the switch"
    );
    assert_eq!(s.offloaded_bytes, 0, "everything reclaimed: {s:?}");
    // Overwritten data is reclaimed once, in its latest version.
    assert!(
        s.reclaimed_bytes > 0 && s.reclaimed_bytes <= s.offloaded_write_bytes,
        "{s:?}"
    );
    assert!(
        o.stopped_ns < setup.stop_ns,
        "reclaim finished before the time limit"
    );
}

/// A 20-minute Exchange-like trace with one write peak, in 5-minute segments.
fn small_exchange() -> ExchangeLike {
    ExchangeLike {
        duration_s: 1200,
        peak_rate_per_s: 2600.0,
        peak_to_mean: 4.0,
        peaks: vec![ExchangePeak {
            start_s: 330,
            duration_s: 20,
            rate_factor: 1.0,
            read_fraction: 0.27,
            concentration: 0.9,
            hot: 1,
        }],
        ..ExchangeLike::everest()
    }
}

fn small_options() -> Options {
    let mut o = Options::default();
    o.peaks.segment_ns = 300 * S as i64;
    o.peaks.top = 1;
    o.parts = Parts::default();
    o
}

#[test]
fn the_experiment_runs_end_to_end_on_a_generated_trace() {
    let w = small_exchange();
    w.validate().unwrap();
    let mut open = || -> Result<Box<dyn RecordReader>, String> {
        Ok(Box::new(Generated::new(
            &w.volume_names(),
            Box::new(w.records()),
        )))
    };
    let mut options = small_options();
    options.parts.recovery = true;
    let report = everest::run(&mut open, "small", &options, &mut |_| {}).unwrap();
    assert_eq!(report.episodes.len(), 1);
    let e = &report.episodes[0];
    assert_eq!(
        e.volumes[0].volume, "exch_1",
        "the hot volume has the most requests"
    );
    assert!((300.0..=330.0).contains(&e.start_s), "{}", e.start_s);
    let json = serde_json::to_value(&report).unwrap();
    let configs = &json["episodes"][0]["configs"];
    for config in ["baseline", "always", "peak"] {
        for key in [
            "mean_ms",
            "read_mean_ms",
            "write_mean_ms",
            "read_p99_ms",
            "write_p99_ms",
        ] {
            assert!(
                configs[config][key].is_f64(),
                "{config}.{key}: {}",
                configs[config][key]
            );
        }
    }
    assert!(json["episodes"][0]["read_pct"].is_f64());
    let speedup = e.peak_speedup.unwrap();
    println!(
        "small exchange-like episode: baseline {:?} ms, peak {:?} ms, always {:?} ms",
        e.configs.baseline.mean_ms, e.configs.peak.mean_ms, e.configs.always.mean_ms
    );
    assert!(speedup > 10.0, "peak off-load speed-up {speedup}");
    assert_eq!(e.configs.peak.offloaded_at_end_bytes, 0);
    // Table 3: the crash came when the most data was off-loaded; the stores scanned their logs.
    let rec = report.recovery.as_ref().expect("a recovery run");
    println!("recovery: {rec:?}");
    assert!(
        rec.max_log_records > 0 && rec.max_valid_bytes > 0,
        "{rec:?}"
    );
    assert!(
        rec.max_store_recovery_s > 0.0 && rec.max_client_recovery_s >= rec.max_store_recovery_s
    );
    assert!(rec.metadata_bytes >= 32);
}

#[test]
fn the_experiment_runs_on_the_real_fragments() {
    let Some(dir) = cordillera_testkit::traces_dir("the_experiment_runs_on_the_real_fragments")
    else {
        return;
    };
    for name in [
        "msr_production/msnfs_slice.ms.trace",
        "umass/umass_websearch_small.mqsim.trace",
    ] {
        let path = dir.join(name);
        let options = ReadOptions {
            time_unit: Some(if name.contains("mqsim") {
                cordillera_trace::TimeUnit::Ns
            } else {
                cordillera_trace::TimeUnit::Ms
            }),
            ..Default::default()
        };
        let mut open = || open(&path, &options).map_err(|e| e.to_string());
        let mut o = small_options();
        o.peaks.rate_window_ns = 10 * S as i64;
        o.peaks.segment_ns = 60 * S as i64;
        let report = everest::run(&mut open, name, &o, &mut |_| {}).unwrap();
        let e = &report.episodes[0];
        let c = &e.configs;
        println!(
            "{name}: episode of {} requests ({} replayed on {} volumes): mean baseline {:?} ms, always {:?} ms, peak {:?} ms",
            e.requests,
            e.replayed_requests,
            e.volumes.iter().filter(|v| v.requests > 0).count(),
            c.baseline.mean_ms,
            c.always.mean_ms,
            c.peak.mean_ms
        );
        assert!(
            e.replayed_requests > 1000,
            "{name}: {}",
            e.replayed_requests
        );
        for r in [&c.baseline, &c.always, &c.peak] {
            assert_eq!(
                r.requests, e.replayed_requests,
                "{name}: every request answered"
            );
        }
        assert_eq!(
            c.peak.offloaded_at_end_bytes, 0,
            "{name}: peak off-load reclaimed all"
        );
    }
}
