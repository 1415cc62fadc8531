//! Bad input never panics: a malformed line is an error naming the file, the line number and
//! the text; `skip_invalid` skips and counts it. One case per reader.

use std::io::Cursor;
use std::path::Path;

use cordillera_trace::read::{from_read, read_all};
use cordillera_trace::{Format, ReadOptions, TraceError};

/// (format, two good lines, one bad line). The bad line is put third.
fn cases() -> Vec<(Format, &'static str, &'static str, &'static str)> {
    vec![
        (
            Format::Msr,
            "128166481075232275,rsrch,1,Write,281358336,45056,94872",
            "128166481075232718,rsrch,1,Read,281292800,65536,94430",
            "128166481075299367,rsrch,1,Write,281227264,65536",
        ),
        (
            Format::Spc,
            "0,20941264,8192,W,0.551706",
            "1,20939840,8192,R,0.554041",
            "0,xx,8192,W,0.6",
        ),
        (
            Format::Ascii5,
            "0.000 5 174224064 16 1",
            "0.221 5 162947904 16 1",
            "0.594 5 174933616 sixteen 1",
        ),
        (
            Format::CloudPhysics,
            "version,time,op,size,lbn",
            "1,5633898,2a,512,42932745",
            "1,5633898,2a,512",
        ),
        (
            Format::Tencent,
            "1538323200,4247200,128,1,1058",
            "1538323199,13896880,128,0,1063",
            "1538323199,13896880,128,7,1063",
        ),
        (
            Format::Systor17,
            "Timestamp,Response,IOType,LUN,Offset,Size",
            "1456095145.133076000,0.000806000,R,0,899056122368,131072",
            "1456095145.126285000,0.008044000,Q,0,4256049987072,122880",
        ),
        (Format::Arc, "230027 8 0 0", "1842745 64 0 1", "216082 8 0"),
        (
            Format::Blkparse,
            "  8,0    3        1     0.000000000   697  Q  WS 3417048 + 8 [kjournald]",
            "  8,0    3        3     0.000011000   697  D  WS 3417048 + 8 [kjournald]",
            "  8,0    3        4     later   697  D  WS 3417048 + 8 [kjournald]",
        ),
    ]
}

fn read(format: Format, text: String, skip_invalid: bool) -> Result<(u64, u64), TraceError> {
    let options = ReadOptions {
        format: Some(format),
        skip_invalid,
        ..ReadOptions::default()
    };
    let mut reader = from_read(
        Path::new("bad.trace"),
        Box::new(Cursor::new(text.into_bytes())),
        &options,
    )?;
    let records = read_all(reader.as_mut())?;
    Ok((records.len() as u64, reader.summary().invalid_skipped))
}

#[test]
fn a_malformed_line_names_file_line_and_text() {
    for (format, a, b, bad) in cases() {
        let text = format!("{a}\n{b}\n{bad}\n{b}\n");
        let err = read(format, text, false).expect_err("malformed line must fail");
        let message = err.to_string();
        assert!(
            matches!(err, TraceError::Malformed { line: 3, .. }),
            "{format}: {message}"
        );
        assert!(message.starts_with("bad.trace:3: "), "{format}: {message}");
        assert!(
            message.contains(&bad[..bad.len().min(20)]),
            "{format}: {message}"
        );
    }
}

#[test]
fn skip_invalid_skips_and_counts() {
    for (format, a, b, bad) in cases() {
        let text = format!("{a}\n{bad}\n{b}\n{bad}\n{b}");
        let (records, skipped) = read(format, text.clone(), true).unwrap();
        assert_eq!(skipped, 2, "{format}");
        let (clean, _) = read(format, format!("{a}\n{b}\n{b}"), false).unwrap();
        assert_eq!(records, clean, "{format}: skipping keeps every good record");
        // Detection finds the same format from the good lines.
        let options = ReadOptions::default();
        let reader = from_read(
            Path::new("x"),
            Box::new(Cursor::new(format!("{a}\n{b}\n"))),
            &options,
        )
        .unwrap();
        assert_eq!(reader.info().format, format);
    }
}

#[test]
fn an_overlong_line_is_malformed_not_a_memory_hog() {
    let line = "1".repeat(200_000);
    let text = format!("128166481075232275,rsrch,1,Write,281358336,45056,94872\n{line}\n");
    let err = read(Format::Msr, text.clone(), false).unwrap_err();
    assert!(err.to_string().contains("longer than 64 KiB"), "{err}");
    assert!(err.to_string().len() < 1_000, "the quoted text is cut");
    assert_eq!(read(Format::Msr, text, true).unwrap(), (1, 1));
}

#[test]
fn unknown_content_is_a_clear_error() {
    let options = ReadOptions::default();
    let err = from_read(
        Path::new("mystery"),
        Box::new(Cursor::new(b"hello world\n".to_vec())),
        &options,
    )
    .err()
    .expect("unknown format");
    assert!(matches!(err, TraceError::UnknownFormat { .. }));
    assert!(err.to_string().contains("--format"));
    let empty = from_read(
        Path::new("empty"),
        Box::new(Cursor::new(Vec::new())),
        &options,
    )
    .err();
    assert!(matches!(empty, Some(TraceError::UnknownFormat { .. })));
}

#[test]
fn compressed_input_is_detected_by_magic() {
    use std::io::Write;
    let text = "128166481075232275,rsrch,1,Write,281358336,45056,94872\n128166481075232718,rsrch,1,Read,281292800,65536,94430\n";
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
    bz.write_all(text.as_bytes()).unwrap();
    let zst = zstd::encode_all(text.as_bytes(), 3).unwrap();
    for bytes in [gz.finish().unwrap(), bz.finish().unwrap(), zst] {
        let mut reader = from_read(
            Path::new("c"),
            Box::new(Cursor::new(bytes)),
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(reader.info().format, Format::Msr);
        assert_eq!(read_all(reader.as_mut()).unwrap().len(), 2);
    }
}

#[test]
fn blkparse_keeps_dispatches_and_stops_at_the_summary() {
    let text = "\
  8,0    3        1     0.000000000   697  Q  WS 3417048 + 8 [kjournald]
  8,0    3        2     0.000006000   697  G  WS 3417048 + 8 [kjournald]
  8,0    3        3     0.000011000   697  D  WS 3417048 + 8 [kjournald]
  8,0    3        4     0.000284000     0  C  WS 3417048 + 8 [0]
  8,16   0        1     0.001000000  1234  D   R 2048 + 256 [fio]
  8,16   0        2     0.001100000  1234  D   N 0 [fio]
  8,0    3        5     0.002000000   697  D  FWS [kjournald]
CPU0 (8,0):
 Reads Queued:           0,        0KiB\t Writes Queued:           1,        4KiB
Total (8,0):
";
    let mut reader = from_read(
        Path::new("blk"),
        Box::new(Cursor::new(text.as_bytes().to_vec())),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(reader.info().format, Format::Blkparse);
    let records = read_all(reader.as_mut()).unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(reader.volumes().name(records[0].volume), "8,0");
    assert_eq!((records[0].time_ns, records[0].length_bytes), (0, 4096));
    assert_eq!(reader.volumes().name(records[1].volume), "8,16");
    assert_eq!(
        (
            records[1].time_ns,
            records[1].offset_bytes,
            records[1].length_bytes
        ),
        (989_000, 2048 * 512, 131_072)
    );
    assert_eq!(reader.summary().invalid_skipped, 0);
}

/// A truncated or corrupt compressed trace is an error naming the file and the records read
/// before it, never a short trace read silently.
#[test]
fn truncated_or_corrupt_compressed_traces_are_errors() {
    use std::io::Write;
    let mut text = String::new();
    for i in 0..20_000u64 {
        text.push_str(&format!(
            "{},rsrch,1,Write,{},4096,94872\n",
            128166481075232275 + i * 1000,
            i * 4096
        ));
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
    bz.write_all(text.as_bytes()).unwrap();
    let zst = zstd::encode_all(text.as_bytes(), 3).unwrap();
    // Concatenated members (as `cat a.gz b.gz` makes): a cut in the second member's header
    // must not read as the end of the trace.
    // Members end at line ends, as when traces are compressed in parts.
    let (first, second) =
        text.split_at(text[text.len() / 2..].find('\n').unwrap() + text.len() / 2 + 1);
    let mut members = Vec::new();
    let mut boundary = 0;
    for part in [first, second] {
        boundary = members.len();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(part.as_bytes()).unwrap();
        members.extend(gz.finish().unwrap());
    }
    for (name, whole) in [
        ("m.csv.gz", members),
        ("t.csv.gz", gz.finish().unwrap()),
        ("t.csv.bz2", bz.finish().unwrap()),
        ("t.csv.zst", zst),
    ] {
        let read = |bytes: Vec<u8>| {
            let mut reader = from_read(
                Path::new(name),
                Box::new(Cursor::new(bytes)),
                &ReadOptions::default(),
            )?;
            read_all(reader.as_mut())
        };
        assert_eq!(read(whole.clone()).unwrap().len(), 20_000, "{name}: whole");
        // Cut anywhere, including just before the end (only the trailer missing).
        let cuts = (1..whole.len())
            .step_by(997)
            .chain(whole.len() - 9..whole.len())
            .chain(boundary - 12..boundary + 24)
            // A cut exactly between members leaves a whole gzip file: nothing can tell.
            .filter(|&cut| cut != boundary || name != "m.csv.gz");
        for cut in cuts {
            let err = read(whole[..cut].to_vec())
                .err()
                .unwrap_or_else(|| panic!("{name} cut at {cut} of {}: accepted", whole.len()));
            let message = err.to_string();
            // Past the magic number the decompressor itself must report the truncation.
            assert!(
                cut < 16
                    || (message.contains(name)
                        && message.contains("stream truncated or corrupt")
                        && message.contains("records)")),
                "{name} cut at {cut}: {message}"
            );
        }
        // Corrupt: flip bytes in the middle.
        let mut bad = whole.clone();
        let mid = bad.len() / 2;
        for b in &mut bad[mid..mid + 16] {
            *b ^= 0x5a;
        }
        let err = read(bad).err();
        assert!(err.is_some(), "{name}: corrupt stream accepted");
        println!("{name}: {}", err.unwrap());
    }
}

#[test]
fn a_header_row_is_skipped_and_noted() {
    let text = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n128166372003061629,wdev,1,Write,1,4096,1\n".to_owned();
    let options = ReadOptions::default();
    let mut reader = from_read(
        Path::new("with-header.csv"),
        Box::new(Cursor::new(text.into_bytes())),
        &options,
    )
    .unwrap();
    assert_eq!(reader.info().format, Format::Msr);
    let records = read_all(reader.as_mut()).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(
        reader.summary().header_skipped.as_deref(),
        Some("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime")
    );
    // A word line after the first record is malformed, not a header.
    let text = "128166372003061629,wdev,1,Write,1,4096,1\nTimestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n".to_owned();
    let err = read(Format::Msr, text, false).unwrap_err();
    assert!(
        matches!(err, TraceError::Malformed { line: 2, .. }),
        "{err}"
    );
}

#[test]
fn an_implausible_request_is_refused_with_its_line() {
    // Offset and size swapped: a "size" of 4 GiB.
    let text = "128166372003061629,wdev,1,Write,4096,4294967296,1\n".to_owned();
    let err = read(Format::Msr, text, false).unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with("bad.trace:1: request larger than 64 MiB"),
        "{message}"
    );
    // Past 1 PiB.
    let text = "128166372003061629,wdev,1,Write,1152921504606846976,4096,1\n".to_owned();
    let message = read(Format::Msr, text, false).unwrap_err().to_string();
    assert!(message.contains("past 1 PiB"), "{message}");
    // Skipped and counted under --skip-invalid.
    let text = "128166372003061629,wdev,1,Write,4096,4294967296,1\n128166372003061629,wdev,1,Write,1,4096,1\n".to_owned();
    assert_eq!(read(Format::Msr, text, true).unwrap(), (1, 1));
}
