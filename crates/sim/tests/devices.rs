//! Device behaviour end to end: determinism of a replay, conservation of requests, and the
//! timing relations each model must show.

use cordillera_models::bench::{run, DiskBench, Pattern};
use cordillera_models::device::hdd::{Hdd, Scheduler};
use cordillera_models::device::nvram::{Nvram, NvramParams};
use cordillera_models::device::ssd::Ssd;
use cordillera_models::device::{drain, Device, IoRequest};
use cordillera_models::presets::{self, build, hdd_params, ssd_params};
use cordillera_sim::replay::replay;
use cordillera_sim::rng::SimRng;
use cordillera_trace::{Record, VolumeId};
use cordillera_types::Op;

fn workload(seed: u64, count: usize, rate_per_s: f64, capacity: u64) -> Vec<Record> {
    let mut rng = SimRng::new(seed, 0);
    let mut t = 0.0;
    (0..count)
        .map(|_| {
            t += rng.exponential(1e9 / rate_per_s);
            let size = 4096 * (1 + rng.below(32));
            Record {
                time_ns: t as i64,
                volume: VolumeId(0),
                op: if rng.chance(0.6) { Op::Read } else { Op::Write },
                offset_bytes: rng.below((capacity - size) / 4096) * 4096,
                length_bytes: size,
                response_ns: None,
            }
        })
        .collect()
}

#[test]
fn same_seed_same_run_event_for_event() {
    for array in [
        None,
        Some("raid5:5".parse().unwrap()),
        Some("raid10:4:16k".parse().unwrap()),
    ] {
        let capacity = build("cheetah-15k", array).unwrap().capacity_bytes();
        let records = workload(42, 20_000, 400.0, capacity);
        let run = || {
            let mut device = build("cheetah-15k", array).unwrap();
            replay(records.iter().copied(), device.as_mut(), 1_000_000_000)
        };
        let (a, b) = (run(), run());
        assert_eq!(a.run_hash, b.run_hash);
        assert_eq!(a.reads, b.reads);
        assert_eq!(a.writes, b.writes);
        let other = workload(43, 20_000, 400.0, capacity);
        let mut device = build("cheetah-15k", array).unwrap();
        let c = replay(other.iter().copied(), device.as_mut(), 1_000_000_000);
        assert_ne!(a.run_hash, c.run_hash, "another seed is another run");
    }
}

#[test]
fn every_request_completes_once_and_intervals_add_up() {
    for name in presets::PRESETS {
        let capacity = presets::device(name).unwrap().capacity_bytes();
        let records = workload(7, 5_000, 100.0, capacity);
        let mut device = presets::device(name).unwrap();
        let r = replay(records.iter().copied(), device.as_mut(), 500_000_000);
        assert_eq!(r.reads.count + r.writes.count, 5_000, "{name}");
        assert_eq!(
            r.intervals.iter().map(|i| i.completions).sum::<u64>(),
            5_000,
            "{name}"
        );
        assert!(
            r.utilization > 0.0 && r.utilization <= 1.0 + 1e-9,
            "{name}: {}",
            r.utilization
        );
        assert!(r.reads.p50_ms <= r.reads.p99_ms && r.reads.p99_ms <= r.reads.max_ms);
        assert_eq!(device.outstanding(), 0);
    }
}

fn one(device: &mut dyn Device, op: Op, offset: u64, size: u64) -> u64 {
    device.submit(
        0,
        IoRequest {
            id: 1,
            op,
            offset_bytes: offset,
            length_bytes: size,
        },
    );
    let done = drain(device);
    assert_eq!(done.len(), 1);
    done[0].time_ns
}

#[test]
fn raid5_small_write_costs_a_read_then_a_write() {
    let at = 10 << 20;
    let read = one(
        build("cheetah-15k", Some("raid5:5".parse().unwrap()))
            .unwrap()
            .as_mut(),
        Op::Read,
        at,
        4096,
    );
    let write = one(
        build("cheetah-15k", Some("raid5:5".parse().unwrap()))
            .unwrap()
            .as_mut(),
        Op::Write,
        at,
        4096,
    );
    let raid0 = one(
        build("cheetah-15k", Some("raid0:4".parse().unwrap()))
            .unwrap()
            .as_mut(),
        Op::Write,
        at,
        4096,
    );
    // Read-modify-write: the old data and parity are read, then rewritten a rotation later.
    assert!(write > read + 3_000_000, "RMW {write} ns vs read {read} ns");
    assert!(
        write > raid0 + 3_000_000,
        "RMW {write} ns vs RAID-0 write {raid0} ns"
    );
    // A full-stripe write reads nothing: about one positioning plus the transfer of a unit.
    let full = one(
        build("cheetah-15k", Some("raid5:5".parse().unwrap()))
            .unwrap()
            .as_mut(),
        Op::Write,
        0,
        4 * 65536,
    );
    assert!(full < write, "full stripe {full} ns vs RMW {write} ns");
}

#[test]
fn hdd_streams_at_media_rate_and_sptf_beats_fcfs() {
    let bench = |device: &mut dyn Device, pattern, qd| {
        run(
            device,
            &DiskBench {
                pattern,
                op: Op::Read,
                block_bytes: 65536,
                queue_depth: qd,
                count: 4_000,
                span_bytes: None,
                seed: 3,
            },
        )
        .unwrap()
    };
    let mut params = hdd_params("cheetah-15k").unwrap();
    let seq = bench(&mut Hdd::new(params.clone()), Pattern::Sequential, 1);
    assert!(
        (seq.throughput_mb_per_s - 90.0).abs() < 1.0,
        "{}",
        seq.throughput_mb_per_s
    );
    let sptf = bench(&mut Hdd::new(params.clone()), Pattern::Random, 16);
    params.scheduler = Scheduler::Fcfs;
    let fcfs = bench(&mut Hdd::new(params.clone()), Pattern::Random, 16);
    params.scheduler = Scheduler::CLook;
    let clook = bench(&mut Hdd::new(params.clone()), Pattern::Random, 16);
    assert!(
        sptf.iops > 1.3 * fcfs.iops,
        "SPTF {} vs FCFS {}",
        sptf.iops,
        fcfs.iops
    );
    assert!(
        clook.iops > 1.1 * fcfs.iops,
        "C-LOOK {} vs FCFS {}",
        clook.iops,
        fcfs.iops
    );
    // FCFS at depth 16 is no faster than depth 1: the queue only waits.
    params.scheduler = Scheduler::Fcfs;
    let fcfs1 = bench(&mut Hdd::new(params), Pattern::Random, 1);
    assert!((fcfs.iops - fcfs1.iops).abs() < 0.05 * fcfs1.iops);
}

#[test]
fn nvram_absorbs_writes_and_serves_reads_it_holds() {
    let params = NvramParams {
        capacity_bytes: 1 << 20,
        write_fraction: 0.5,
        latency_ms: 0.05,
        destage_depth_max: 4,
    };
    let mut nv = Nvram::new(params, Hdd::new(hdd_params("cheetah-15k").unwrap()));
    nv.submit(
        0,
        IoRequest {
            id: 1,
            op: Op::Write,
            offset_bytes: 1 << 30,
            length_bytes: 65536,
        },
    );
    let done = drain(&mut nv);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].time_ns, 50_000, "acknowledged at NVRAM latency");
    nv.submit(
        1_000_000_000,
        IoRequest {
            id: 2,
            op: Op::Read,
            offset_bytes: 1 << 30,
            length_bytes: 4096,
        },
    );
    assert_eq!(
        drain(&mut nv)[0].time_ns,
        1_000_050_000,
        "the written blocks are cached"
    );
    nv.submit(
        2_000_000_000,
        IoRequest {
            id: 3,
            op: Op::Read,
            offset_bytes: 5 << 30,
            length_bytes: 4096,
        },
    );
    assert!(
        drain(&mut nv)[0].time_ns > 2_000_000_000 + 1_000_000,
        "a miss goes to the disk"
    );
    // More writes than the write share holds: the excess waits for the disk.
    for i in 0..16 {
        nv.submit(
            3_000_000_000,
            IoRequest {
                id: 10 + i,
                op: Op::Write,
                offset_bytes: (i * 7 + 3) << 26,
                length_bytes: 65536,
            },
        );
    }
    let done = drain(&mut nv);
    let fast = done.iter().filter(|c| c.time_ns == 3_000_050_000).count();
    assert_eq!(fast, 8, "512 KiB of write share holds eight 64 KiB writes");
    assert_eq!(done.len(), 16);
}

#[test]
fn ssd_channels_serve_in_parallel() {
    let params = ssd_params("ssd").unwrap();
    let mut ssd = Ssd::new(params.clone());
    for id in 0..params.channels as u64 {
        ssd.submit(
            0,
            IoRequest {
                id,
                op: Op::Read,
                offset_bytes: id * 4096,
                length_bytes: 4096,
            },
        );
    }
    let done = drain(&mut ssd);
    let single = done[0].time_ns;
    assert!(
        done.iter().all(|c| c.time_ns == single),
        "one request per channel at once"
    );
    ssd.submit(
        single,
        IoRequest {
            id: 99,
            op: Op::Read,
            offset_bytes: 0,
            length_bytes: 4096,
        },
    );
    ssd.submit(
        single,
        IoRequest {
            id: 100,
            op: Op::Write,
            offset_bytes: 0,
            length_bytes: 4096,
        },
    );
    let done = drain(&mut ssd);
    assert!(
        done[0].time_ns - single < done[1].time_ns - single,
        "reads are faster than writes"
    );
}
