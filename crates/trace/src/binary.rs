//! The compact binary trace format, version 1. `docs/FORMATS.md` is its specification; this file
//! is its only implementation.
//!
//! ```text
//! file    = header block* trailer
//! header  = "CDLTRACE" u16:version u16:flags u8:source_format u8[3]:0 i64:origin_unix_ns
//!           u32:crc32c(previous 24 bytes) u32:0                                  (32 bytes)
//! block   = "CTB1" u32:records u32:new_volumes u32:raw_len u32:compressed_len
//!           u32:crc32c(previous 20 bytes ++ payload) payload:zstd(raw)
//! raw     = (varint:name_len name)*new_volumes record*records
//! record  = zigzag:time_delta_ns varint:volume u8:flags varint:offset varint:size
//!           [varint:response_ns if flags & 2]
//! trailer = "CTE1" u64:total_records u32:flags u32:crc32c(previous 16 bytes)
//! ```
//! All integers little-endian. Volumes are numbered in order of definition.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use cordillera_types::Op;

use crate::error::TraceError;
use crate::format::Format;
use crate::limits::{BINARY_BLOCK_RAW_BYTES_MAX, BINARY_BLOCK_RECORDS, BINARY_BLOCK_RECORDS_MAX};
use crate::reader::{ReadOptions, RecordReader};
use crate::record::{ReadSummary, Record, TraceInfo, VolumeId, VolumeTable};

pub const MAGIC: &[u8; 8] = b"CDLTRACE";
pub const VERSION: u16 = 1;
const BLOCK_MAGIC: &[u8; 4] = b"CTB1";
const TRAILER_MAGIC: &[u8; 4] = b"CTE1";
const HEADER_BYTES: usize = 32;
const BLOCK_HEADER_BYTES: usize = 24;
const TRAILER_BYTES: usize = 20;

const FLAG_HAS_TIME: u16 = 1;
const FLAG_HAS_ORIGIN: u16 = 2;
const FLAGS_KNOWN: u16 = FLAG_HAS_TIME | FLAG_HAS_ORIGIN;
/// Trailer flag: the source text's last line had no newline.
const TRAILER_LAST_LINE_UNTERMINATED: u32 = 1;
const RECORD_WRITE: u8 = 1;
const RECORD_HAS_RESPONSE: u8 = 2;

/// zstd level of new files: level 3 compresses MSR records to about 4 bytes each at several
/// hundred MB/s.
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// Writes records as a binary trace. Call [`BinaryWriter::finish`] at the end: a file without
/// its trailer reads as truncated.
pub struct BinaryWriter<W: Write> {
    out: W,
    path: PathBuf,
    compressor: zstd::bulk::Compressor<'static>,
    header_written: bool,
    raw_volumes: Vec<u8>,
    raw_records: Vec<u8>,
    block_records: u32,
    block_new_volumes: u32,
    total_records: u64,
    previous_time_ns: i64,
    /// Indexed by the source's [`VolumeId`]: the file's volume number plus one, 0 if undefined.
    volume_numbers: Vec<u32>,
    volumes_defined: u32,
}

impl<W: Write> BinaryWriter<W> {
    pub fn new(out: W, path: &Path) -> Result<BinaryWriter<W>, TraceError> {
        Self::with_level(out, path, DEFAULT_ZSTD_LEVEL)
    }

    pub fn with_level(out: W, path: &Path, level: i32) -> Result<BinaryWriter<W>, TraceError> {
        Ok(BinaryWriter {
            out,
            path: path.to_owned(),
            compressor: zstd::bulk::Compressor::new(level).map_err(|e| TraceError::io(path, e))?,
            header_written: false,
            raw_volumes: Vec::new(),
            raw_records: Vec::with_capacity(1 << 20),
            block_records: 0,
            block_new_volumes: 0,
            total_records: 0,
            previous_time_ns: 0,
            volume_numbers: Vec::new(),
            volumes_defined: 0,
        })
    }

    /// Appends one record; `volumes` and `info` are the source reader's.
    pub fn write(
        &mut self,
        record: &Record,
        volumes: &VolumeTable,
        info: &TraceInfo,
    ) -> Result<(), TraceError> {
        if let Some(reason) = crate::limits::implausible(record.offset_bytes, record.length_bytes) {
            return Err(TraceError::Unwritable {
                index: self.total_records,
                reason: reason.to_owned(),
            });
        }
        let index = record.volume.index();
        if self.volume_numbers.len() <= index {
            self.volume_numbers.resize(index + 1, 0);
        }
        if self.volume_numbers[index] == 0 {
            let name = volumes.name(record.volume).as_bytes();
            put_varint(&mut self.raw_volumes, name.len() as u64);
            self.raw_volumes.extend_from_slice(name);
            self.volumes_defined += 1;
            self.volume_numbers[index] = self.volumes_defined;
            self.block_new_volumes += 1;
        }
        let delta = record.time_ns.wrapping_sub(self.previous_time_ns);
        self.previous_time_ns = record.time_ns;
        let raw = &mut self.raw_records;
        put_varint(raw, zigzag(delta));
        put_varint(raw, (self.volume_numbers[index] - 1) as u64);
        let mut flags = 0;
        if record.op == Op::Write {
            flags |= RECORD_WRITE;
        }
        if record.response_ns.is_some() {
            flags |= RECORD_HAS_RESPONSE;
        }
        raw.push(flags);
        put_varint(raw, record.offset_bytes);
        put_varint(raw, record.length_bytes);
        if let Some(response_ns) = record.response_ns {
            put_varint(raw, response_ns);
        }
        self.block_records += 1;
        self.total_records += 1;
        if self.block_records == BINARY_BLOCK_RECORDS {
            self.flush_block(info)?;
        }
        Ok(())
    }

    fn write_header(&mut self, info: &TraceInfo) -> Result<(), TraceError> {
        let mut header = Vec::with_capacity(HEADER_BYTES);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        let mut flags = 0;
        if info.has_time {
            flags |= FLAG_HAS_TIME;
        }
        if info.origin_unix_ns.is_some() {
            flags |= FLAG_HAS_ORIGIN;
        }
        header.extend_from_slice(&flags.to_le_bytes());
        header.push(info.format.tag());
        header.extend_from_slice(&[0; 3]);
        header.extend_from_slice(&info.origin_unix_ns.unwrap_or(0).to_le_bytes());
        let crc = crc32c::crc32c(&header);
        header.extend_from_slice(&crc.to_le_bytes());
        header.extend_from_slice(&[0; 4]);
        debug_assert_eq!(header.len(), HEADER_BYTES);
        self.header_written = true;
        self.out
            .write_all(&header)
            .map_err(|e| TraceError::io(&self.path, e))
    }

    fn flush_block(&mut self, info: &TraceInfo) -> Result<(), TraceError> {
        if !self.header_written {
            self.write_header(info)?;
        }
        if self.block_records == 0 {
            return Ok(());
        }
        let mut raw = std::mem::take(&mut self.raw_volumes);
        raw.extend_from_slice(&self.raw_records);
        let payload = self
            .compressor
            .compress(&raw)
            .map_err(|e| TraceError::io(&self.path, e))?;
        let mut header = [0u8; BLOCK_HEADER_BYTES];
        header[0..4].copy_from_slice(BLOCK_MAGIC);
        header[4..8].copy_from_slice(&self.block_records.to_le_bytes());
        header[8..12].copy_from_slice(&self.block_new_volumes.to_le_bytes());
        header[12..16].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        header[16..20].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&header[..20]), &payload);
        header[20..24].copy_from_slice(&crc.to_le_bytes());
        let io = |e| TraceError::io(&self.path, e);
        self.out.write_all(&header).map_err(io)?;
        self.out.write_all(&payload).map_err(io)?;
        raw.clear();
        self.raw_volumes = raw;
        self.raw_records.clear();
        self.block_records = 0;
        self.block_new_volumes = 0;
        Ok(())
    }

    /// Writes the last block and the trailer, flushes, and returns the output.
    pub fn finish(mut self, info: &TraceInfo) -> Result<W, TraceError> {
        self.flush_block(info)?;
        let mut trailer = Vec::with_capacity(TRAILER_BYTES);
        trailer.extend_from_slice(TRAILER_MAGIC);
        trailer.extend_from_slice(&self.total_records.to_le_bytes());
        let flags = if info.last_line_unterminated {
            TRAILER_LAST_LINE_UNTERMINATED
        } else {
            0
        };
        trailer.extend_from_slice(&flags.to_le_bytes());
        let crc = crc32c::crc32c(&trailer);
        trailer.extend_from_slice(&crc.to_le_bytes());
        let io = |e| TraceError::io(&self.path, e);
        self.out.write_all(&trailer).map_err(io)?;
        self.out.flush().map_err(io)?;
        Ok(self.out)
    }
}

/// Reads a binary trace block by block, verifying every checksum.
pub struct BinaryReader<R: Read> {
    input: R,
    path: PathBuf,
    info: TraceInfo,
    volumes: VolumeTable,
    selected: Vec<bool>,
    options_volumes: Vec<String>,
    summary: ReadSummary,
    decompressor: zstd::bulk::Decompressor<'static>,
    compressed: Vec<u8>,
    raw: Vec<u8>,
    position: usize,
    block_records_left: u32,
    previous_time_ns: i64,
    records_seen: u64,
    /// Bytes of the file consumed, for error messages.
    offset: u64,
    ended: bool,
}

impl<R: Read> BinaryReader<R> {
    pub fn new(
        path: &Path,
        mut input: R,
        options: &ReadOptions,
    ) -> Result<BinaryReader<R>, TraceError> {
        let mut header = [0u8; HEADER_BYTES];
        let corrupt = |offset, reason: &str| TraceError::Corrupt {
            path: path.to_owned(),
            offset,
            reason: reason.to_owned(),
        };
        read_exact_or(&mut input, &mut header)
            .map_err(|e| TraceError::io(path, e))?
            .ok_or_else(|| corrupt(0, "file shorter than its header"))?;
        if &header[0..8] != MAGIC {
            return Err(corrupt(0, "not a Cordillera binary trace (bad magic)"));
        }
        let stored_crc = u32::from_le_bytes(header[24..28].try_into().unwrap());
        if crc32c::crc32c(&header[..24]) != stored_crc {
            return Err(corrupt(0, "header checksum mismatch"));
        }
        let version = u16::from_le_bytes([header[8], header[9]]);
        if version != VERSION {
            return Err(corrupt(
                8,
                &format!("unsupported version {version} (this build reads {VERSION})"),
            ));
        }
        let flags = u16::from_le_bytes([header[10], header[11]]);
        if flags & !FLAGS_KNOWN != 0 {
            return Err(corrupt(10, "unknown header flags"));
        }
        let format =
            Format::from_tag(header[12]).ok_or_else(|| corrupt(12, "unknown source format"))?;
        let origin = i64::from_le_bytes(header[16..24].try_into().unwrap());
        Ok(BinaryReader {
            input,
            path: path.to_owned(),
            info: TraceInfo {
                format,
                origin_unix_ns: (flags & FLAG_HAS_ORIGIN != 0).then_some(origin),
                has_time: flags & FLAG_HAS_TIME != 0,
                last_line_unterminated: false,
            },
            volumes: VolumeTable::new(),
            selected: Vec::new(),
            options_volumes: options.volumes.clone(),
            summary: ReadSummary::default(),
            decompressor: zstd::bulk::Decompressor::new().map_err(|e| TraceError::io(path, e))?,
            compressed: Vec::new(),
            raw: Vec::new(),
            position: 0,
            block_records_left: 0,
            previous_time_ns: 0,
            records_seen: 0,
            offset: HEADER_BYTES as u64,
            ended: false,
        })
    }

    /// The format of the trace the binary file was converted from.
    pub fn source_format(&self) -> Format {
        self.info.format
    }

    fn read_error(&self, e: std::io::Error) -> TraceError {
        TraceError::Read {
            path: self.path.clone(),
            records: self.records_seen,
            message: e.to_string(),
        }
    }

    fn corrupt(&self, reason: impl Into<String>) -> TraceError {
        TraceError::Corrupt {
            path: self.path.clone(),
            offset: self.offset,
            reason: reason.into(),
        }
    }

    /// Loads the next block; `false` at the trailer.
    fn load_block(&mut self) -> Result<bool, TraceError> {
        let mut magic = [0u8; 4];
        read_exact_or(&mut self.input, &mut magic)
            .map_err(|e| self.read_error(e))?
            .ok_or_else(|| self.corrupt("truncated: no trailer"))?;
        if &magic == TRAILER_MAGIC {
            let mut rest = [0u8; TRAILER_BYTES - 4];
            read_exact_or(&mut self.input, &mut rest)
                .map_err(|e| self.read_error(e))?
                .ok_or_else(|| self.corrupt("truncated trailer"))?;
            let total = u64::from_le_bytes(rest[0..8].try_into().unwrap());
            let flags = u32::from_le_bytes(rest[8..12].try_into().unwrap());
            let crc = u32::from_le_bytes(rest[12..16].try_into().unwrap());
            let expected = crc32c::crc32c_append(crc32c::crc32c(TRAILER_MAGIC), &rest[0..12]);
            if crc != expected {
                return Err(self.corrupt("trailer checksum mismatch"));
            }
            if flags & !TRAILER_LAST_LINE_UNTERMINATED != 0 {
                return Err(self.corrupt("unknown trailer flags"));
            }
            self.info.last_line_unterminated = flags & TRAILER_LAST_LINE_UNTERMINATED != 0;
            if total != self.records_seen {
                return Err(self.corrupt(format!(
                    "trailer counts {total} records, the blocks hold {}",
                    self.records_seen
                )));
            }
            let mut extra = [0u8; 1];
            if read_exact_or(&mut self.input, &mut extra)
                .map_err(|e| self.read_error(e))?
                .is_some()
            {
                return Err(self.corrupt("bytes after the trailer"));
            }
            return Ok(false);
        }
        if &magic != BLOCK_MAGIC {
            return Err(self.corrupt("bad block magic"));
        }
        let mut header = [0u8; BLOCK_HEADER_BYTES];
        header[0..4].copy_from_slice(&magic);
        read_exact_or(&mut self.input, &mut header[4..])
            .map_err(|e| self.read_error(e))?
            .ok_or_else(|| self.corrupt("truncated block header"))?;
        let field = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().unwrap());
        let (records, new_volumes, raw_len, compressed_len, crc) =
            (field(4), field(8), field(12), field(16), field(20));
        if records == 0 || records > BINARY_BLOCK_RECORDS_MAX {
            return Err(self.corrupt(format!("block claims {records} records")));
        }
        if raw_len > BINARY_BLOCK_RAW_BYTES_MAX || compressed_len > BINARY_BLOCK_RAW_BYTES_MAX {
            return Err(self.corrupt("block larger than the format allows"));
        }
        // Grow the buffer as bytes arrive: a corrupt length must not allocate 128 MiB up front.
        self.compressed.clear();
        (&mut self.input)
            .take(compressed_len as u64)
            .read_to_end(&mut self.compressed)
            .map_err(|e| self.read_error(e))?;
        if self.compressed.len() != compressed_len as usize {
            return Err(self.corrupt("truncated block"));
        }
        let expected = crc32c::crc32c_append(crc32c::crc32c(&header[..20]), &self.compressed);
        if crc != expected {
            return Err(self.corrupt("block checksum mismatch"));
        }
        self.raw.clear();
        self.raw.reserve(raw_len as usize);
        let n = self
            .decompressor
            .decompress_to_buffer(&self.compressed, &mut self.raw)
            .map_err(|e| self.corrupt(format!("zstd: {e}")))?;
        if n != raw_len as usize {
            return Err(self.corrupt("block decompresses to a different length"));
        }
        self.position = 0;
        for _ in 0..new_volumes {
            let len = self.varint()? as usize;
            let name = self
                .raw
                .get(self.position..self.position.saturating_add(len))
                .ok_or_else(|| self.corrupt("volume name past the block end"))?
                .to_vec();
            self.position += len;
            let before = self.volumes.len();
            self.volumes
                .intern(&name)
                .filter(|_| self.volumes.len() > before)
                .ok_or_else(|| self.corrupt("volume name repeated, not UTF-8, or too many"))?;
            let name = String::from_utf8_lossy(&name);
            let keep =
                self.options_volumes.is_empty() || self.options_volumes.iter().any(|v| *v == name);
            self.selected.push(keep);
        }
        self.block_records_left = records;
        self.offset += (BLOCK_HEADER_BYTES + compressed_len as usize) as u64;
        Ok(true)
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, TraceError> {
        match get_varint(&self.raw, &mut self.position) {
            Some(v) => Ok(v),
            None => Err(self.corrupt("bad varint in block")),
        }
    }

    fn decode_record(&mut self) -> Result<Record, TraceError> {
        let volumes = self.volumes.len() as u64;
        match decode_one(
            &self.raw,
            &mut self.position,
            &mut self.previous_time_ns,
            volumes,
        ) {
            Some(record) => Ok(record),
            None => Err(self.corrupt("malformed record (bad varint, time, volume or flags, or a request over 64 MiB or past 1 PiB)")),
        }
    }
}

/// Decodes one record at `position`; `None` for anything malformed. Kept free of error values so
/// the hot loop stays small.
#[inline]
fn decode_one(
    raw: &[u8],
    position: &mut usize,
    previous_time_ns: &mut i64,
    volumes: u64,
) -> Option<Record> {
    let delta = unzigzag(get_varint(raw, position)?);
    let time_ns = previous_time_ns.checked_add(delta)?;
    *previous_time_ns = time_ns;
    let volume = get_varint(raw, position)?;
    if volume >= volumes {
        return None;
    }
    let flags = *raw.get(*position)?;
    *position += 1;
    if flags & !(RECORD_WRITE | RECORD_HAS_RESPONSE) != 0 {
        return None;
    }
    let offset_bytes = get_varint(raw, position)?;
    let length_bytes = get_varint(raw, position)?;
    if crate::limits::implausible(offset_bytes, length_bytes).is_some() {
        return None;
    }
    let response_ns = if flags & RECORD_HAS_RESPONSE != 0 {
        Some(get_varint(raw, position)?)
    } else {
        None
    };
    Some(Record {
        time_ns,
        volume: VolumeId(volume as u32),
        op: if flags & RECORD_WRITE != 0 {
            Op::Write
        } else {
            Op::Read
        },
        offset_bytes,
        length_bytes,
        response_ns,
    })
}

impl<R: Read> RecordReader for BinaryReader<R> {
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
        loop {
            if self.block_records_left == 0 {
                if self.position != self.raw.len() {
                    return Err(self.corrupt("bytes left over at the end of a block"));
                }
                if self.ended || !self.load_block()? {
                    self.ended = true;
                    return Ok(None);
                }
            }
            let record = self.decode_record()?;
            self.block_records_left -= 1;
            self.records_seen += 1;
            self.summary.lines += 1;
            if self.selected[record.volume.index()] {
                self.summary.records += 1;
                return Ok(Some(record));
            }
            self.summary.filtered_out += 1;
        }
    }
}

/// Fills `buf` completely: `Ok(Some(()))`, or `Ok(None)` if the input ended first.
fn read_exact_or(input: &mut impl Read, buf: &mut [u8]) -> io::Result<Option<()>> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => return Ok(None),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(()))
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// LEB128, at most 10 bytes, no overflow past 64 bits.
#[inline]
fn get_varint(buf: &[u8], position: &mut usize) -> Option<u64> {
    let first = *buf.get(*position)?;
    if first < 0x80 {
        *position += 1;
        return Some(first as u64);
    }
    let mut value: u64 = 0;
    let mut shift = 0u32;
    loop {
        let byte = *buf.get(*position)?;
        *position += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        value |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_the_edges() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            let mut at = 0;
            assert_eq!(get_varint(&buf, &mut at), Some(v));
            assert_eq!(at, buf.len());
        }
        for v in [0, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        let mut at = 0;
        assert_eq!(get_varint(&[0xff; 11], &mut at), None);
        let mut at = 0;
        assert_eq!(get_varint(&[0x80], &mut at), None);
    }
}
