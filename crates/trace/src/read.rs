//! Opening a trace: decompression, format detection, and the streaming text reader.
//!
//! Every reader streams: memory is bounded by one line (or one binary block) plus the volume
//! table, whatever the size of the trace.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};

use crate::binary::{BinaryReader, MAGIC as BINARY_MAGIC};
use crate::detect::{detect_text, detect_time_unit, TimeUnitChoice, UnitSource};
use crate::error::{quote, TraceError};
use crate::format::Format;
use crate::limits::{DETECT_SAMPLE_BYTES, LINE_BYTES_MAX};
use crate::oracle::OracleReader;
use crate::parse::{parse_line, Line};
pub use crate::reader::{ReadOptions, RecordReader};
use crate::record::{ReadSummary, Record, TraceInfo, VolumeId, VolumeTable};

/// Opens `path` (`-` for standard input), decompressing `.gz`, `.bz2` and `.zst` content
/// (recognized by magic number, whatever the file name) and detecting the format unless given.
pub fn open(path: &Path, options: &ReadOptions) -> Result<Box<dyn RecordReader>, TraceError> {
    let input: Box<dyn Read> = if path == Path::new("-") {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(path).map_err(|e| TraceError::io(path, e))?)
    };
    from_read(path, input, options)
}

/// Like [`open`], for any byte stream; `path` only names it in errors.
pub fn from_read(
    path: &Path,
    input: Box<dyn Read>,
    options: &ReadOptions,
) -> Result<Box<dyn RecordReader>, TraceError> {
    let io_err = |e| TraceError::io(path, e);
    let (head, input) = peek(input, 8).map_err(io_err)?;
    let decoded: Box<dyn Read> = if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(Decompressed::new(
            "gzip",
            flate2::read::MultiGzDecoder::new(input),
        ))
    } else if head.starts_with(b"BZh") {
        Box::new(Decompressed::new(
            "bzip2",
            bzip2::read::MultiBzDecoder::new(input),
        ))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(Decompressed::new(
            "zstd",
            zstd::stream::read::Decoder::new(input).map_err(io_err)?,
        ))
    } else {
        input
    };
    let (sample, input) = peek(decoded, DETECT_SAMPLE_BYTES).map_err(|e| TraceError::Read {
        path: path.to_owned(),
        records: 0,
        message: e.to_string(),
    })?;
    let at_eof = sample.len() < DETECT_SAMPLE_BYTES;
    let named_oracle = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.to_ascii_lowercase().contains("oraclegeneral"));
    let format = match options.format {
        Some(format) => format,
        None if sample.starts_with(BINARY_MAGIC) => Format::Binary,
        None if named_oracle => Format::OracleGeneral,
        None => detect_text(&sample, at_eof).ok_or_else(|| TraceError::UnknownFormat {
            path: path.to_owned(),
            first_line: quote(sample.split(|b| *b == b'\n').next().unwrap_or(&[])),
        })?,
    };
    if format == Format::Binary {
        return Ok(Box::new(BinaryReader::new(path, input, options)?));
    }
    if format == Format::OracleGeneral {
        return Ok(Box::new(OracleReader::new(
            path,
            BufReader::with_capacity(256 * 1024, input),
            options,
        )));
    }
    let mut options = options.clone();
    let unit = (format == Format::Ascii5).then(|| match options.time_unit {
        Some(unit) => TimeUnitChoice {
            unit,
            how: UnitSource::Given,
            reason: "given (--time-unit)".into(),
        },
        None => detect_time_unit(&sample, at_eof),
    });
    if let Some(choice) = &unit {
        options.parse.ascii5_time_unit = choice.unit;
    }
    let mut reader = TextReader::new(
        path,
        BufReader::with_capacity(256 * 1024, input),
        format,
        &options,
    );
    reader.summary.time_unit = unit;
    Ok(Box::new(reader))
}

/// A decompressor whose failures say what kind of stream broke: a truncated or corrupt stream
/// is an error (`InvalidData`), never a silent end of the trace.
struct Decompressed<R> {
    what: &'static str,
    inner: R,
}

impl<R: Read> Decompressed<R> {
    fn new(what: &'static str, inner: R) -> Decompressed<R> {
        Decompressed { what, inner }
    }
}

impl<R: Read> Read for Decompressed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::Interrupted {
                return e;
            }
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} stream truncated or corrupt: {e}", self.what),
            )
        })
    }
}

/// A stream that fails while the sample is read (a truncated compressed trace shorter than
/// the sample) yields the bytes it gave and then the error, so that the error is reported with
/// the records read before it.
fn peek(mut input: Box<dyn Read>, n: usize) -> io::Result<(Vec<u8>, Box<dyn Read>)> {
    let mut head = Vec::with_capacity(n);
    let mut failed = None;
    while head.len() < n {
        let mut chunk = [0u8; 8192];
        let want = chunk.len().min(n - head.len());
        match input.read(&mut chunk[..want]) {
            Ok(0) => break,
            Ok(got) => head.extend_from_slice(&chunk[..got]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if head.is_empty() => return Err(e),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let replay = Cursor::new(head.clone());
    let rest: Box<dyn Read> = match failed {
        Some(e) => Box::new(Failing(Some(e))),
        None => input,
    };
    Ok((head, Box::new(replay.chain(rest))))
}

/// Yields its error once (then end of stream).
struct Failing(Option<io::Error>);

impl Read for Failing {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        match self.0.take() {
            Some(e) => Err(e),
            None => Ok(0),
        }
    }
}

/// The reader of every text format: one line at a time, parsed by [`parse_line`].
pub struct TextReader<R> {
    input: R,
    path: PathBuf,
    format: Format,
    options: ReadOptions,
    info: TraceInfo,
    volumes: VolumeTable,
    /// Indexed by [`VolumeId`]: whether the volume was selected with `--volume`.
    selected: Vec<bool>,
    summary: ReadSummary,
    line: Vec<u8>,
    volume_key: Vec<u8>,
    line_number: u64,
    origin_ns: Option<i64>,
    ended: bool,
}

impl<R: BufRead> TextReader<R> {
    pub fn new(path: &Path, input: R, format: Format, options: &ReadOptions) -> TextReader<R> {
        assert!(format != Format::Binary);
        TextReader {
            input,
            path: path.to_owned(),
            format,
            options: options.clone(),
            info: TraceInfo {
                format,
                origin_unix_ns: None,
                has_time: format != Format::Arc,
                last_line_unterminated: false,
            },
            volumes: VolumeTable::new(),
            selected: Vec::new(),
            summary: ReadSummary::default(),
            line: Vec::with_capacity(256),
            volume_key: Vec::with_capacity(64),
            line_number: 0,
            origin_ns: None,
            ended: false,
        }
    }

    fn malformed(&self, reason: &'static str) -> TraceError {
        TraceError::Malformed {
            path: self.path.clone(),
            line: self.line_number,
            reason,
            text: quote(&self.line),
        }
    }

    /// Whether the current line, which is not a record, is the trace's header: the first line
    /// that is not a record or a line the format ignores, and reads as one
    /// ([`crate::detect::looks_like_header`]).
    fn is_header(&self) -> bool {
        let first = self.summary.records == 0
            && self.summary.invalid_skipped == 0
            && self.summary.header_skipped.is_none()
            && self.summary.filtered_out == 0;
        first && crate::detect::looks_like_header(&self.line)
    }

    /// Skips the line under `--skip-invalid`, or fails.
    fn invalid(&mut self, reason: &'static str) -> Result<(), TraceError> {
        if !self.options.skip_invalid {
            return Err(self.malformed(reason));
        }
        self.summary.invalid_skipped += 1;
        if self.summary.first_invalid.is_none() {
            self.summary.first_invalid = Some(self.malformed(reason).to_string());
        }
        Ok(())
    }

    fn intern(&mut self, volume: &[u8], suffix: Option<&[u8]>) -> Result<VolumeId, &'static str> {
        let key = match suffix {
            None => volume,
            Some(suffix) => {
                self.volume_key.clear();
                self.volume_key.extend_from_slice(volume);
                self.volume_key.push(b'_');
                self.volume_key.extend_from_slice(suffix);
                &self.volume_key
            }
        };
        let before = self.volumes.len();
        let id = self
            .volumes
            .intern(key)
            .ok_or("volume name is not UTF-8, or too many volumes")?;
        if self.volumes.len() > before {
            let name = self.volumes.name(id);
            let keep =
                self.options.volumes.is_empty() || self.options.volumes.iter().any(|v| v == name);
            self.selected.push(keep);
        }
        Ok(id)
    }
}

/// The outcome of reading one line with a length bound.
enum LineRead {
    Line,
    /// The last line of the input, without a newline.
    LastLine,
    TooLong,
    Eof,
}

/// Reads one line into `line` (without its `\n`), keeping at most `max` bytes of it.
fn read_line_bounded(
    input: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> io::Result<LineRead> {
    line.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let buf = match input.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(match (any, too_long) {
                (false, _) => LineRead::Eof,
                (true, true) => LineRead::TooLong,
                (true, false) => LineRead::LastLine,
            });
        }
        any = true;
        let (chunk, used, done) = match memchr::memchr(b'\n', buf) {
            Some(at) => (&buf[..at], at + 1, true),
            None => (buf, buf.len(), false),
        };
        if line.len() + chunk.len() > max {
            too_long = true;
            let room = max - line.len();
            line.extend_from_slice(&chunk[..room]);
        } else {
            line.extend_from_slice(chunk);
        }
        input.consume(used);
        if done {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

impl<R: BufRead> RecordReader for TextReader<R> {
    fn info(&self) -> &TraceInfo {
        &self.info
    }

    fn volumes(&self) -> &VolumeTable {
        &self.volumes
    }

    fn summary(&self) -> &ReadSummary {
        &self.summary
    }

    fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        while !self.ended {
            let read = read_line_bounded(&mut self.input, &mut self.line, LINE_BYTES_MAX).map_err(
                |e| TraceError::Read {
                    path: self.path.clone(),
                    records: self.summary.records,
                    message: e.to_string(),
                },
            )?;
            match read {
                LineRead::Eof => break,
                LineRead::TooLong => {
                    self.line_number += 1;
                    self.summary.lines += 1;
                    self.invalid("line longer than 64 KiB")?;
                    continue;
                }
                LineRead::Line | LineRead::LastLine => {
                    self.line_number += 1;
                    self.summary.lines += 1;
                    self.info.last_line_unterminated = matches!(read, LineRead::LastLine);
                }
            }
            let line = std::mem::take(&mut self.line);
            let outcome = self.record_of(&line);
            self.line = line;
            match outcome {
                Ok(Some(record)) => return Ok(Some(record)),
                Ok(None) => {}
                Err(_) if self.is_header() => {
                    self.summary.header_skipped = Some(quote(&self.line));
                }
                Err(reason) => self.invalid(reason)?,
            }
        }
        self.ended = true;
        Ok(None)
    }
}

impl<R: BufRead> TextReader<R> {
    /// The record of one line, `None` for a line without one (or of an unselected volume).
    fn record_of(&mut self, line: &[u8]) -> Result<Option<Record>, &'static str> {
        let raw = match parse_line(self.format, line, &self.options.parse)? {
            Line::Record(raw) => raw,
            Line::Ignore => {
                self.summary.ignored += 1;
                return Ok(None);
            }
            Line::End => {
                self.ended = true;
                return Ok(None);
            }
        };
        if let Some(reason) = crate::limits::implausible(raw.offset_bytes, raw.length_bytes) {
            return Err(reason);
        }
        let volume = self.intern(raw.volume, raw.volume_suffix)?;
        let origin_ns = *self.origin_ns.get_or_insert(raw.time_ns);
        if self.info.origin_unix_ns.is_none() && self.format.has_wall_clock() {
            self.info.origin_unix_ns = Some(origin_ns);
        }
        let time_ns = raw
            .time_ns
            .checked_sub(origin_ns)
            .ok_or("time too far from the trace start")?;
        if !self.selected[volume.index()] {
            self.summary.filtered_out += 1;
            return Ok(None);
        }
        self.summary.records += 1;
        Ok(Some(Record {
            time_ns,
            volume,
            op: raw.op,
            offset_bytes: raw.offset_bytes,
            length_bytes: raw.length_bytes,
            response_ns: raw.response_ns,
        }))
    }
}

/// Reads every record of a reader into memory. For tests and small traces only.
pub fn read_all(reader: &mut dyn RecordReader) -> Result<Vec<Record>, TraceError> {
    let mut records = Vec::new();
    while let Some(record) = reader.next_record()? {
        records.push(record);
    }
    Ok(records)
}
