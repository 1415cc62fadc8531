use super::*;
use crate::presets;

/// `streams` readers, each with one read outstanding, each reading `count` 64 KiB blocks
/// in order from its own region 10 GB apart; MB/s.
fn streams(params: HddParams, streams: u64, count: u64) -> f64 {
    let mut disk = Hdd::new(params);
    let block = 64 * 1024;
    let mut next: Vec<u64> = (0..streams).map(|s| s * 10_000_000_000).collect();
    let mut left = vec![count; streams as usize];
    for s in 0..streams {
        disk.submit(
            0,
            IoRequest {
                id: s,
                op: Op::Read,
                offset_bytes: next[s as usize],
                length_bytes: block,
            },
        );
        next[s as usize] += block;
        left[s as usize] -= 1;
    }
    let mut done = Vec::new();
    let mut end = 0;
    while let Some(t) = disk.poll_timeout() {
        disk.advance(t, &mut done);
        for c in done.drain(..) {
            end = c.time_ns;
            let s = c.id as usize;
            if left[s] > 0 {
                left[s] -= 1;
                disk.submit(
                    c.time_ns,
                    IoRequest {
                        id: c.id,
                        op: Op::Read,
                        offset_bytes: next[s],
                        length_bytes: block,
                    },
                );
                next[s] += block;
            }
        }
    }
    assert_eq!(disk.outstanding(), 0);
    (streams * count * block) as f64 / end as f64 * 1e3
}

/// As [`streams`], each reader sending its next read `think_ns` after the last one's
/// answer (a request's trip over a network); MB/s.
fn streams_thinking(params: HddParams, streams: u64, count: u64, think_ns: Nanos) -> f64 {
    let mut disk = Hdd::new(params);
    let block = 64 * 1024;
    let mut next: Vec<u64> = (0..streams).map(|s| s * 10_000_000_000).collect();
    let mut left = vec![count; streams as usize];
    let mut due: BTreeMap<(Nanos, u64), ()> = (0..streams).map(|s| ((0, s), ())).collect();
    let (mut done, mut end) = (Vec::new(), 0);
    loop {
        let submit = due.keys().next().copied();
        match (disk.poll_timeout(), submit) {
            (Some(t), s) if s.is_none_or(|(at, _)| t < at) => {
                disk.advance(t, &mut done);
                for c in done.drain(..) {
                    end = end.max(c.time_ns);
                    if left[c.id as usize] > 0 {
                        due.insert((c.time_ns + think_ns, c.id), ());
                    }
                }
            }
            (_, Some((at, s))) => {
                due.remove(&(at, s));
                left[s as usize] -= 1;
                let offset_bytes = next[s as usize];
                next[s as usize] += block;
                let request = IoRequest {
                    id: s,
                    op: Op::Read,
                    offset_bytes,
                    length_bytes: block,
                };
                disk.submit(at, request);
            }
            _ => break,
        }
    }
    assert_eq!(disk.outstanding(), 0);
    (streams * count * block) as f64 / end as f64 * 1e3
}

fn asynchronous() -> HddParams {
    let mut params = presets::hdd_params("sierra-1tb").unwrap();
    params.read_ahead.as_mut().unwrap().asynchronous = true;
    params
}

#[test]
fn asynchronous_read_ahead_reads_the_next_window_while_the_stream_is_served() {
    let sync = presets::hdd_params("sierra-1tb").unwrap();
    let think = 1_000_000;
    let one = (
        streams_thinking(sync.clone(), 1, 2000, think),
        streams_thinking(asynchronous(), 1, 2000, think),
    );
    let nine = (
        streams_thinking(sync, 9, 300, think),
        streams_thinking(asynchronous(), 9, 300, think),
    );
    println!(
        "MB/s synchronous and asynchronous, 1 ms between reads: one stream {one:?}, nine {nine:?}"
    );
    assert!(one.1 > one.0 && nine.1 > nine.0, "{one:?} {nine:?}");
}

fn without_read_ahead() -> HddParams {
    HddParams {
        read_ahead: None,
        ..presets::hdd_params("sierra-1tb").unwrap()
    }
}

#[test]
fn read_ahead_serves_interleaved_streams_and_keeps_one_stream_at_the_media_rate() {
    let with = presets::hdd_params("sierra-1tb").unwrap();
    assert!(with.read_ahead.is_some());
    let one = (
        streams(without_read_ahead(), 1, 2000),
        streams(with.clone(), 1, 2000),
    );
    assert!(
        one.1 >= 0.97 * one.0 && one.1 <= 1.03 * one.0,
        "one stream: {one:?} MB/s without and with read-ahead"
    );
    let nine = (streams(without_read_ahead(), 9, 300), streams(with, 9, 300));
    println!("MB/s without and with read-ahead: one stream {one:?}, nine streams {nine:?}");
    assert!(
        nine.1 > 2.0 * nine.0,
        "nine interleaved streams: {nine:?} MB/s without and with read-ahead"
    );
}

#[test]
fn random_reads_do_not_read_ahead() {
    let run = |params: HddParams| {
        let mut device = Hdd::new(params);
        let spec = crate::bench::DiskBench {
            pattern: crate::bench::Pattern::Random,
            op: Op::Read,
            block_bytes: 64 * 1024,
            queue_depth: 64,
            count: 5_000,
            span_bytes: None,
            seed: 3,
        };
        crate::bench::run(&mut device, &spec).unwrap().iops
    };
    let (without, with) = (
        run(without_read_ahead()),
        run(presets::hdd_params("sierra-1tb").unwrap()),
    );
    println!(
        "random 64 KiB reads, 64 outstanding: {without:.1} IOPS without read-ahead, {with:.1} with"
    );
    // Not identical: a block drawn twice is a hit, which changes the scheduler's later
    // choices (5,000 draws over 1 TB: one hit with this seed).
    assert!(
        (with - without).abs() <= 0.02 * without,
        "{without} against {with} IOPS"
    );
}

#[test]
fn a_write_drops_the_cached_data_it_overlaps() {
    let mut disk = Hdd::new(presets::hdd_params("sierra-1tb").unwrap());
    let read = |id, offset| IoRequest {
        id,
        op: Op::Read,
        offset_bytes: offset,
        length_bytes: 4096,
    };
    let mut done = Vec::new();
    let mut finish = |disk: &mut Hdd| {
        let mut last = 0;
        while let Some(t) = disk.poll_timeout() {
            disk.advance(t, &mut done);
            last = done.last().map_or(last, |c: &Completion| c.time_ns);
        }
        last
    };
    disk.submit(0, read(1, 1 << 30));
    let t = finish(&mut disk);
    // Cached: a hit, well under a millisecond.
    disk.submit(t, read(2, 1 << 30));
    let hit = finish(&mut disk) - t;
    assert!(hit < 200_000, "hit {hit} ns");
    disk.submit(
        t + hit,
        IoRequest {
            id: 3,
            op: Op::Write,
            offset_bytes: (1 << 30) + 1024,
            length_bytes: 512,
        },
    );
    let t = finish(&mut disk);
    disk.submit(t, read(4, 1 << 30));
    let miss = finish(&mut disk) - t;
    assert!(miss > 1_000_000, "after the write: {miss} ns");
}

#[test]
fn seek_curve_meets_its_three_points_and_rises() {
    let n = 10_000;
    let curve = SeekCurve::fit(0.6, 4.7, 11.0, n);
    assert!((curve.seek_ns(1) - 0.6e6).abs() < 1.0);
    assert!((curve.seek_ns(n - 1) - 11.0e6).abs() < 1.0);
    // Mean over random pairs, by exhaustive distance distribution.
    let mut mean = 0.0;
    for d in 1..n {
        let p = 2.0 * (n - d) as f64 / (n as f64 * n as f64);
        mean += p * curve.seek_ns(d);
    }
    assert!(
        (mean / 1e6 - 4.7).abs() < 0.05,
        "mean seek {} ms",
        mean / 1e6
    );
    let mut last = 0.0;
    for d in 1..n {
        let t = curve.seek_ns(d);
        assert!(t >= last, "seek time falls at distance {d}");
        last = t;
    }
}
