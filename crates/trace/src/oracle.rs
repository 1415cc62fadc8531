//! libCacheSim's `oracleGeneral` binary traces, read and written, so that users of that tool can
//! bring their traces and take ours to it.
//!
//! The format: no header; each request 24 bytes, little-endian, packed:
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0–3 | `u32 clock_time` | seconds since the trace start |
//! | 4–11 | `u64 obj_id` | the object (here: a 4 KiB block number) |
//! | 12–15 | `u32 obj_size` | bytes |
//! | 16–23 | `i64 next_access_vtime` | the next request to the same object, counted from 1 (libCacheSim's `traceConv`); −1 if none |
//!
//! Reading: every request is a read of `obj_size` bytes at byte offset `obj_id × 4096` in one
//! volume named `0` (ids of 2^36 or more — hashes of object names — are folded modulo 2^36, so
//! offsets stay below 256 TiB); times have one-second resolution. A file whose length is not a
//! multiple of 24 is truncated, and says so.
//!
//! Writing: `obj_id` is the request's first 4 KiB block, `obj_size` its length, `clock_time` its
//! time in whole seconds; `next_access_vtime` needs the future, so the writer patches each
//! object's previous record when the object is requested again. Memory: one entry per distinct
//! object (the working set) plus a buffer of the latest records; older records are patched in
//! place in the file, so the output must be a seekable file.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use cordillera_types::Op;
use rustc_hash::FxHashMap;

use crate::error::TraceError;
use crate::format::Format;
use crate::reader::{ReadOptions, RecordReader};
use crate::record::{ReadSummary, Record, TraceInfo, VolumeId, VolumeTable};

/// Bytes of one request.
pub const RECORD_BYTES: usize = 24;
/// Object ids are folded below this, as 4 KiB block numbers.
pub const OBJECT_IDS: u64 = 1 << 36;
const BLOCK: u64 = 4096;

/// Reads an `oracleGeneral` stream (already decompressed).
pub struct OracleReader<R> {
    input: R,
    path: PathBuf,
    info: TraceInfo,
    volumes: VolumeTable,
    summary: ReadSummary,
    keep: bool,
    offset: u64,
}

impl<R: Read> OracleReader<R> {
    pub fn new(path: &Path, input: R, options: &ReadOptions) -> OracleReader<R> {
        let mut volumes = VolumeTable::new();
        volumes.intern(b"0");
        OracleReader {
            input,
            path: path.to_owned(),
            info: TraceInfo {
                format: Format::OracleGeneral,
                origin_unix_ns: None,
                has_time: true,
                last_line_unterminated: false,
            },
            volumes,
            summary: ReadSummary::default(),
            keep: options.volumes.is_empty() || options.volumes.iter().any(|v| v == "0"),
            offset: 0,
        }
    }

    fn corrupt(&self, reason: impl Into<String>) -> TraceError {
        TraceError::Corrupt {
            path: self.path.clone(),
            offset: self.offset,
            reason: reason.into(),
        }
    }
}

/// Decodes one request; `Err` names what is wrong with it.
pub fn decode(bytes: &[u8; RECORD_BYTES]) -> Result<Record, &'static str> {
    let word = |at: usize, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&bytes[at..at + n]);
        u64::from_le_bytes(b)
    };
    let time_s = word(0, 4);
    let object = word(4, 8) % OBJECT_IDS;
    let size = word(12, 4);
    let next = word(16, 8) as i64;
    if next < -1 {
        return Err("next_access_vtime below -1");
    }
    if let Some(reason) = crate::limits::implausible(object * BLOCK, size) {
        return Err(reason);
    }
    Ok(Record {
        time_ns: time_s as i64 * 1_000_000_000,
        volume: VolumeId(0),
        op: Op::Read,
        offset_bytes: object * BLOCK,
        length_bytes: size,
        response_ns: None,
    })
}

impl<R: Read> RecordReader for OracleReader<R> {
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
            let mut bytes = [0u8; RECORD_BYTES];
            let mut got = 0;
            while got < RECORD_BYTES {
                match self.input.read(&mut bytes[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(TraceError::Read {
                            path: self.path.clone(),
                            records: self.summary.records,
                            message: e.to_string(),
                        })
                    }
                }
            }
            if got == 0 {
                return Ok(None);
            }
            if got < RECORD_BYTES {
                return Err(self.corrupt(format!(
                    "truncated: the last request has {got} of its {RECORD_BYTES} bytes"
                )));
            }
            self.summary.lines += 1;
            let record = decode(&bytes).map_err(|reason| self.corrupt(reason))?;
            self.offset += RECORD_BYTES as u64;
            if !self.keep {
                self.summary.filtered_out += 1;
                continue;
            }
            self.summary.records += 1;
            return Ok(Some(record));
        }
    }
}

/// Writes `oracleGeneral` to a file, patching each object's previous request with the index of
/// its next one.
pub struct OracleWriter {
    file: File,
    path: PathBuf,
    /// Requests not yet written: `buffered_from` is the index of the first.
    buffer: VecDeque<[u8; RECORD_BYTES]>,
    buffered_from: u64,
    /// Each object's latest request index.
    last: FxHashMap<u64, u64>,
    written: u64,
}

impl OracleWriter {
    /// Requests kept in memory before they go to the file (24 MiB).
    const BUFFER_RECORDS: usize = 1 << 20;

    pub fn create(path: &Path) -> Result<OracleWriter, TraceError> {
        let file = File::create(path).map_err(|e| TraceError::io(path, e))?;
        Ok(OracleWriter {
            file,
            path: path.to_owned(),
            buffer: VecDeque::new(),
            buffered_from: 0,
            last: FxHashMap::default(),
            written: 0,
        })
    }

    pub fn write(&mut self, record: &Record) -> Result<(), TraceError> {
        let unwritable = |reason: &str| TraceError::Unwritable {
            index: self.written,
            reason: reason.to_owned(),
        };
        if record.time_ns < 0 || record.time_ns / 1_000_000_000 > u32::MAX as i64 {
            return Err(unwritable("time outside 0 to 2^32 s"));
        }
        let size = u32::try_from(record.length_bytes)
            .map_err(|_| unwritable("request of 4 GiB or more"))?;
        // One id space over every volume: a volume's blocks are offset by its number.
        let object = (record.offset_bytes / BLOCK + ((record.volume.0 as u64) << 32)) % OBJECT_IDS;
        let index = self.written;
        if let Some(previous) = self.last.insert(object, index) {
            self.patch(previous, index)?;
        }
        let mut bytes = [0u8; RECORD_BYTES];
        bytes[0..4].copy_from_slice(&((record.time_ns / 1_000_000_000) as u32).to_le_bytes());
        bytes[4..12].copy_from_slice(&object.to_le_bytes());
        bytes[12..16].copy_from_slice(&size.to_le_bytes());
        bytes[16..24].copy_from_slice(&(-1i64).to_le_bytes());
        self.buffer.push_back(bytes);
        self.written += 1;
        if self.buffer.len() >= Self::BUFFER_RECORDS {
            self.flush_oldest(Self::BUFFER_RECORDS / 2)?;
        }
        Ok(())
    }

    /// Sets request `at`'s next access to request `next` (both counted from 0; the field counts
    /// from 1, as libCacheSim's own converter writes it).
    fn patch(&mut self, at: u64, next: u64) -> Result<(), TraceError> {
        let value = (next as i64 + 1).to_le_bytes();
        if at >= self.buffered_from {
            self.buffer[(at - self.buffered_from) as usize][16..24].copy_from_slice(&value);
            return Ok(());
        }
        self.file
            .write_all_at(&value, at * RECORD_BYTES as u64 + 16)
            .map_err(|e| TraceError::io(&self.path, e))
    }

    fn flush_oldest(&mut self, n: usize) -> Result<(), TraceError> {
        let mut out = Vec::with_capacity(n * RECORD_BYTES);
        for bytes in self.buffer.drain(..n.min(self.buffer.len())) {
            out.extend_from_slice(&bytes);
        }
        self.file
            .write_all_at(&out, self.buffered_from * RECORD_BYTES as u64)
            .map_err(|e| TraceError::io(&self.path, e))?;
        self.buffered_from += (out.len() / RECORD_BYTES) as u64;
        Ok(())
    }

    /// Writes what is buffered and syncs; returns the requests written.
    pub fn finish(mut self) -> Result<u64, TraceError> {
        self.flush_oldest(self.buffer.len())?;
        self.file
            .flush()
            .map_err(|e| TraceError::io(&self.path, e))?;
        self.file
            .sync_all()
            .map_err(|e| TraceError::io(&self.path, e))?;
        Ok(self.written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{from_read, read_all};

    fn record(t_s: i64, block: u64, len: u64) -> Record {
        Record {
            time_ns: t_s * 1_000_000_000,
            volume: VolumeId(0),
            op: Op::Write,
            offset_bytes: block * 4096,
            length_bytes: len,
            response_ns: None,
        }
    }

    #[test]
    fn written_traces_read_back_with_the_next_accesses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.oracleGeneral.bin");
        let mut w = OracleWriter::create(&path).unwrap();
        let input = [
            record(0, 7, 4096),
            record(1, 9, 8192),
            record(1, 7, 4096),
            record(3, 1, 512),
        ];
        for r in &input {
            w.write(r).unwrap();
        }
        assert_eq!(w.finish().unwrap(), 4);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 4 * RECORD_BYTES);
        let next =
            |i: usize| i64::from_le_bytes(bytes[i * 24 + 16..i * 24 + 24].try_into().unwrap());
        // Request 0's block is requested again by the third request: 3, counted from 1.
        assert_eq!((next(0), next(1), next(2), next(3)), (3, -1, -1, -1));
        // Read back by name (no magic: the name says the format).
        let options = ReadOptions::default();
        let mut reader = crate::read::open(&path, &options).unwrap();
        assert_eq!(reader.info().format, Format::OracleGeneral);
        let back = read_all(reader.as_mut()).unwrap();
        let got: Vec<(i64, u64, u64)> = back
            .iter()
            .map(|r| {
                (
                    r.time_ns / 1_000_000_000,
                    r.offset_bytes / 4096,
                    r.length_bytes,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![(0, 7, 4096), (1, 9, 8192), (1, 7, 4096), (3, 1, 512)]
        );
        assert!(back.iter().all(|r| r.op == Op::Read));
        // A truncated file is an error, never a shorter trace.
        let cut = bytes[..bytes.len() - 5].to_vec();
        let options = ReadOptions {
            format: Some(Format::OracleGeneral),
            ..ReadOptions::default()
        };
        let mut reader =
            from_read(Path::new("cut"), Box::new(io::Cursor::new(cut)), &options).unwrap();
        let e = read_all(reader.as_mut()).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn corrupt_requests_are_refused() {
        let mut bytes = [0u8; RECORD_BYTES];
        bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&bytes).unwrap_err().contains("64 MiB"));
        let mut bytes = [0u8; RECORD_BYTES];
        bytes[16..24].copy_from_slice(&(-7i64).to_le_bytes());
        assert!(decode(&bytes).is_err());
        let mut bytes = [0u8; RECORD_BYTES];
        bytes[4..12].copy_from_slice(&u64::MAX.to_le_bytes());
        bytes[12..16].copy_from_slice(&4096u32.to_le_bytes());
        let r = decode(&bytes).unwrap();
        assert!(r.offset_bytes < 1 << 48);
    }
}
