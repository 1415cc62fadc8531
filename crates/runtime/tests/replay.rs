//! `replay` (a trace against a live NBD export) on the crate's own NBD server serving a file,
//! and against a server that goes away mid-replay.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use cordillera_runtime::nbd_client::NbdUrl;
use cordillera_runtime::nbd_server::{serve_in_background, Backend, ExportConfig, FileBackend};
use cordillera_runtime::replay::{replay, Mode, ReplayError, ReplayOptions};
use cordillera_trace::{Record, VolumeId};
use cordillera_types::Op;
use cordillera_wire::nbd;

const EXPORT_BYTES: u64 = 16 << 20;

fn start(read_only: bool) -> (NbdUrl, tempfile::NamedTempFile) {
    let file = tempfile::NamedTempFile::new().unwrap();
    file.as_file().set_len(EXPORT_BYTES).unwrap();
    let backend: Arc<dyn Backend> = Arc::new(FileBackend::open(file.path()).unwrap());
    let config = ExportConfig {
        name: "vol".into(),
        read_only,
        ..ExportConfig::default()
    };
    let addr = serve_in_background(backend, config).unwrap();
    (format!("nbd://{addr}/vol").parse().unwrap(), file)
}

fn record(time_ms: i64, op: Op, offset_bytes: u64, length_bytes: u64) -> Record {
    Record {
        time_ns: time_ms * 1_000_000,
        volume: VolumeId(0),
        op,
        offset_bytes,
        length_bytes,
        response_ns: Some(250_000),
    }
}

fn run(
    url: &NbdUrl,
    records: Vec<Record>,
    options: &ReplayOptions,
) -> Result<cordillera_runtime::replay::LiveReplayReport, ReplayError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(replay(url, records.into_iter(), options))
}

#[test]
fn open_loop_sends_every_record_no_earlier_than_its_time_and_the_writes_land() {
    let (url, file) = start(false);
    // 200 records 1 ms apart: writes to even 4 KiB blocks, reads of odd ones.
    let mut records: Vec<Record> = (0..200)
        .map(|i| {
            let op = if i % 2 == 0 { Op::Write } else { Op::Read };
            record(i, op, i as u64 * 4096, 4096)
        })
        .collect();
    records.push(record(200, Op::Write, 0, 0)); // zero length: skipped
    records.push(record(201, Op::Write, EXPORT_BYTES + (1 << 20), 4096)); // wraps past block 255
    records.push(record(150, Op::Read, 0, 4096)); // out of order: late
    let options = ReplayOptions {
        mode: Mode::Open { speed: 1.0 },
        ..ReplayOptions::default()
    };
    let report = run(&url, records, &options).unwrap();
    assert_eq!(report.records, 202);
    assert_eq!(report.skipped_empty, 1);
    assert_eq!(report.wrapped, 1);
    assert_eq!(report.late, 1);
    assert_eq!(report.errors, 0);
    assert_eq!(report.reads.count + report.writes.count, 202);
    assert_eq!(report.writes.count, 101);
    // The last record is due 201 ms after the first: an open-loop replay cannot end sooner.
    assert!(report.duration_s >= 0.201, "{}", report.duration_s);
    assert_eq!(report.send_lag.as_ref().unwrap().count, 202);
    assert_eq!(report.recorded_reads.as_ref().unwrap().count, 101);
    let intervals: u64 = report.intervals.iter().map(|i| i.completions).sum();
    assert_eq!(intervals, 202);

    let mut block = vec![0u8; 4096];
    for i in 0..200u64 {
        file.as_file().read_exact_at(&mut block, i * 4096).unwrap();
        let written = block.iter().any(|&b| b != 0);
        assert_eq!(written, i % 2 == 0, "block {i}");
    }

    // Four times faster: the same trace may take a quarter of the time, not less.
    let fast = ReplayOptions {
        mode: Mode::Open { speed: 4.0 },
        ..ReplayOptions::default()
    };
    let records: Vec<Record> = (0..200).map(|i| record(i, Op::Read, 0, 4096)).collect();
    let report = run(&url, records, &fast).unwrap();
    assert!(report.duration_s >= 0.199 / 4.0, "{}", report.duration_s);
    assert_eq!(report.reads.count, 200);

    // Arrivals beyond --max-outstanding wait and are counted.
    let capped = ReplayOptions {
        max_outstanding: 1,
        ..ReplayOptions::default()
    };
    let burst: Vec<Record> = (0..50)
        .map(|i| record(0, Op::Read, i * 4096, 4096))
        .collect();
    let report = run(&url, burst, &capped).unwrap();
    assert_eq!(report.max_outstanding_seen, 1);
    assert!(report.throttled > 0, "50 simultaneous arrivals, one slot");
}

#[test]
fn closed_loop_keeps_exactly_the_depth_in_flight() {
    let (url, _file) = start(false);
    let records: Vec<Record> = (0..3000)
        .map(|i| record(0, Op::Write, (i % 4096) * 4096, 4096))
        .collect();
    for depth in [1, 8] {
        let options = ReplayOptions {
            mode: Mode::Closed { depth },
            max_records: Some(2000),
            ..ReplayOptions::default()
        };
        let report = run(&url, records.clone(), &options).unwrap();
        assert_eq!(report.records, 2000, "max_records stops the replay");
        assert_eq!(report.writes.count, 2000);
        assert_eq!(report.max_outstanding_seen, depth as u64);
        assert!(report.send_lag.is_none());
        assert_eq!(report.throttled, 0, "only open-loop arrivals are throttled");
        assert!(report.iops > 0.0 && report.mb_per_s > 0.0);
    }
}

#[test]
fn bad_options_and_read_only_exports_are_refused() {
    let (url, _file) = start(true);
    let writes = vec![record(0, Op::Write, 0, 4096)];
    let options = ReplayOptions::default();
    assert!(matches!(
        run(&url, writes, &options),
        Err(ReplayError::ReadOnly)
    ));
    let reads = vec![record(0, Op::Read, 0, 4096)];
    assert_eq!(run(&url, reads.clone(), &options).unwrap().reads.count, 1);
    for mode in [Mode::Open { speed: 0.0 }, Mode::Closed { depth: 0 }] {
        let options = ReplayOptions {
            mode,
            ..ReplayOptions::default()
        };
        assert!(matches!(
            run(&url, reads.clone(), &options),
            Err(ReplayError::BadOptions)
        ));
    }
    let nobody: NbdUrl = "127.0.0.1:1".parse().unwrap();
    let error = run(&nobody, reads, &ReplayOptions::default()).unwrap_err();
    assert!(error.to_string().contains("cannot connect"), "{error}");
}

/// A server that negotiates, answers `answered` requests, then drops the connection.
fn vanishing_server(answered: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&nbd::greeting()).unwrap();
        let mut flags = [0u8; 4];
        s.read_exact(&mut flags).unwrap();
        let mut header = [0u8; 16];
        s.read_exact(&mut header).unwrap();
        let length = u32::from_be_bytes(header[12..16].try_into().unwrap());
        let mut payload = vec![0u8; length as usize];
        s.read_exact(&mut payload).unwrap();
        let flags = nbd::FLAG_HAS_FLAGS | nbd::FLAG_SEND_FLUSH;
        let info = nbd::info_export(EXPORT_BYTES, flags);
        s.write_all(&nbd::option_reply(nbd::OPT_GO, nbd::REP_INFO, &info))
            .unwrap();
        s.write_all(&nbd::option_reply(nbd::OPT_GO, nbd::REP_ACK, &[]))
            .unwrap();
        for _ in 0..answered {
            let mut request = [0u8; nbd::REQUEST_HEADER_BYTES];
            s.read_exact(&mut request).unwrap();
            let request = nbd::parse_request(request).unwrap();
            let mut data = vec![0u8; request.length as usize];
            s.read_exact(&mut data).unwrap();
            s.write_all(&nbd::simple_reply(request.handle, 0)).unwrap();
        }
        // Dropped: the connection ends with requests unanswered.
    });
    addr
}

#[test]
fn a_server_that_goes_away_mid_replay_is_a_typed_error_not_a_hang() {
    let url: NbdUrl = vanishing_server(10).to_string().parse().unwrap();
    let records: Vec<Record> = (0..100)
        .map(|i| record(i, Op::Write, i as u64 * 4096, 4096))
        .collect();
    let options = ReplayOptions {
        mode: Mode::Closed { depth: 4 },
        ..ReplayOptions::default()
    };
    match run(&url, records, &options) {
        // The server may close between two replies, with nothing in flight at that moment.
        Err(ReplayError::Lost { in_flight, reason }) => {
            assert!(in_flight <= 4, "at most the depth: {in_flight}");
            // Closed, or reset when the server closed with requests unread.
            assert!(
                reason.contains("closed the connection") || reason.contains("reset"),
                "{reason}"
            );
        }
        other => panic!("expected a lost connection, got {other:?}"),
    }
}
