//! The binary trace format: lossless round trip, and every corruption detected, never a panic.

use std::io::Cursor;
use std::path::Path;

use cordillera_trace::binary::{BinaryReader, BinaryWriter};
use cordillera_trace::read::{from_read, read_all};
use cordillera_trace::synth::{generate, SynthOptions};
use cordillera_trace::{Format, ReadOptions, Record, TraceError, TraceInfo, VolumeTable};

fn encode(info: &TraceInfo, volumes: &VolumeTable, records: &[Record]) -> Vec<u8> {
    let mut writer = BinaryWriter::new(Vec::new(), Path::new("mem")).unwrap();
    for r in records {
        writer.write(r, volumes, info).unwrap();
    }
    writer.finish(info).unwrap()
}

fn decode(bytes: Vec<u8>) -> Result<(TraceInfo, Vec<String>, Vec<Record>), TraceError> {
    let mut reader = BinaryReader::new(
        Path::new("mem"),
        Cursor::new(bytes),
        &ReadOptions::default(),
    )?;
    let records = read_all(&mut reader)?;
    use cordillera_trace::RecordReader;
    let names = reader
        .volumes()
        .names()
        .map(|(_, n)| n.to_owned())
        .collect();
    Ok((reader.info().clone(), names, records))
}

fn sample() -> (TraceInfo, VolumeTable, Vec<Record>) {
    let (mut info, volumes, mut records) = generate(&SynthOptions {
        duration_s: 16 * 3600,
        ..SynthOptions::default()
    });
    info.format = Format::Msr;
    // Exercise response times, negative deltas and large values.
    for (i, r) in records.iter_mut().enumerate() {
        if i % 3 == 0 {
            r.response_ns = Some(i as u64 * 100);
        }
    }
    records[10].time_ns -= 5_000_000_000;
    records[11].offset_bytes = cordillera_trace::limits::DEVICE_BYTES_MAX - (64 << 20);
    records[11].length_bytes = 64 << 20;
    (info, volumes, records)
}

#[test]
fn round_trip_is_lossless_across_blocks() {
    let (info, volumes, records) = sample();
    assert!(records.len() > 200_000, "several blocks: {}", records.len());
    let bytes = encode(&info, &volumes, &records);
    let (read_info, names, read_records) = decode(bytes.clone()).unwrap();
    assert_eq!(read_info, info);
    // Volumes are numbered in order of first appearance in the file: compare by name.
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, vec!["synth_0", "synth_1", "synth_2", "synth_3"]);
    assert_eq!(read_records.len(), records.len());
    for (read, written) in read_records.iter().zip(&records) {
        assert_eq!(names[read.volume.index()], volumes.name(written.volume));
        let renamed = Record {
            volume: written.volume,
            ..*read
        };
        assert_eq!(&renamed, written);
    }
    // Opening by content finds the binary format.
    let mut reader = from_read(
        Path::new("mem"),
        Box::new(Cursor::new(bytes)),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(read_all(reader.as_mut()).unwrap().len(), records.len());
}

#[test]
fn empty_trace_round_trips() {
    let info = TraceInfo {
        format: Format::Arc,
        origin_unix_ns: None,
        has_time: false,
        last_line_unterminated: true,
    };
    let bytes = encode(&info, &VolumeTable::new(), &[]);
    let (read_info, names, records) = decode(bytes).unwrap();
    assert_eq!(read_info, info);
    assert!(names.is_empty() && records.is_empty());
}

#[test]
fn every_truncation_is_an_error() {
    let (info, volumes, records) = sample();
    let bytes = encode(&info, &volumes, &records[..3_000]);
    for len in (0..bytes.len())
        .step_by(97)
        .chain([bytes.len() - 1, bytes.len() - 16])
    {
        let result = decode(bytes[..len].to_vec());
        assert!(
            result.is_err(),
            "truncated at {len} of {} must not read as complete",
            bytes.len()
        );
    }
}

#[test]
fn every_flipped_byte_is_detected() {
    let (info, volumes, records) = sample();
    let bytes = encode(&info, &volumes, &records[..3_000]);
    for at in (0..bytes.len()).step_by(13) {
        for bit in [0, 7] {
            let mut bad = bytes.clone();
            bad[at] ^= 1 << bit;
            // Reserved header bytes (28..32) are not covered by the checksum.
            if (28..32).contains(&at) {
                continue;
            }
            match decode(bad) {
                Err(TraceError::Corrupt { .. }) => {}
                other => panic!(
                    "flip of bit {bit} at byte {at} not detected: {:?}",
                    other.map(|r| r.2.len())
                ),
            }
        }
    }
    let mut extra = bytes.clone();
    extra.push(0);
    assert!(matches!(decode(extra), Err(TraceError::Corrupt { .. })));
}

#[test]
fn an_implausible_request_is_neither_written_nor_read() {
    let (info, volumes, mut records) = sample();
    records.truncate(20);
    records[5].length_bytes = u64::MAX;
    let mut writer = BinaryWriter::new(Vec::new(), Path::new("mem")).unwrap();
    let mut refused = None;
    for (i, r) in records.iter().enumerate() {
        if let Err(e) = writer.write(r, &volumes, &info) {
            refused = Some((i, e.to_string()));
        }
    }
    let (i, message) = refused.expect("the writer refuses a request over 64 MiB");
    assert_eq!(i, 5);
    assert!(message.contains("larger than 64 MiB"), "{message}");
}
