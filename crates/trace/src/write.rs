//! Text writers: MSR Cambridge CSV and fio iolog version 2.

use std::io::Write;
use std::path::{Path, PathBuf};

use cordillera_types::units::{FILETIME_TICKS_AT_UNIX_EPOCH, SECTOR_BYTES};
use cordillera_types::Op;

use crate::error::TraceError;
use crate::record::{Record, TraceInfo, VolumeTable};

/// Writes MSR Cambridge CSV. Times become FILETIME ticks (100 ns): the trace's wall-clock origin
/// when it has one, 1601-01-01 otherwise; sub-100 ns digits are dropped. A volume named
/// `host_N` becomes hostname `host`, disk `N`; any other name becomes hostname `name`, disk 0.
/// A missing response time is written as 0.
pub struct MsrWriter<W: Write> {
    out: W,
    /// Every line but the last ends with a newline; the last one's is written by `finish`.
    pending_newline: bool,
    line: Vec<u8>,
    path: PathBuf,
    written: u64,
    itoa: itoa::Buffer,
}

impl<W: Write> MsrWriter<W> {
    pub fn new(out: W, path: &Path) -> MsrWriter<W> {
        MsrWriter {
            out,
            pending_newline: false,
            line: Vec::with_capacity(128),
            path: path.to_owned(),
            written: 0,
            itoa: itoa::Buffer::new(),
        }
    }

    pub fn write(
        &mut self,
        record: &Record,
        volumes: &VolumeTable,
        info: &TraceInfo,
    ) -> Result<(), TraceError> {
        let origin_ticks = match info.origin_unix_ns {
            Some(unix_ns) => unix_ns.div_euclid(100) + FILETIME_TICKS_AT_UNIX_EPOCH,
            None => 0,
        };
        let ticks = origin_ticks + record.time_ns.div_euclid(100);
        if ticks < 0 {
            return Err(TraceError::Unwritable {
                index: self.written,
                reason: "time before 1601-01-01 in FILETIME".into(),
            });
        }
        let name = volumes.name(record.volume);
        let (host, disk) = split_msr_volume(name);
        if host.contains([',', '\n', '\r']) {
            return Err(TraceError::Unwritable {
                index: self.written,
                reason: format!("volume name {name:?} cannot be an MSR hostname"),
            });
        }
        let line = &mut self.line;
        line.clear();
        if self.pending_newline {
            line.push(b'\n');
        }
        self.pending_newline = true;
        line.extend_from_slice(self.itoa.format(ticks).as_bytes());
        line.push(b',');
        line.extend_from_slice(host.as_bytes());
        line.push(b',');
        line.extend_from_slice(disk.as_bytes());
        line.extend_from_slice(match record.op {
            Op::Read => b",Read,",
            Op::Write => b",Write,",
        });
        line.extend_from_slice(self.itoa.format(record.offset_bytes).as_bytes());
        line.push(b',');
        line.extend_from_slice(self.itoa.format(record.length_bytes).as_bytes());
        line.push(b',');
        line.extend_from_slice(
            self.itoa
                .format(record.response_ns.unwrap_or(0) / 100)
                .as_bytes(),
        );
        self.written += 1;
        self.out
            .write_all(line)
            .map_err(|e| TraceError::io(&self.path, e))
    }

    /// Ends the last line with a newline unless the source's last line had none.
    pub fn finish(mut self, info: &TraceInfo) -> Result<W, TraceError> {
        if self.pending_newline && !info.last_line_unterminated {
            self.out
                .write_all(b"\n")
                .map_err(|e| TraceError::io(&self.path, e))?;
        }
        self.out
            .flush()
            .map_err(|e| TraceError::io(&self.path, e))?;
        Ok(self.out)
    }
}

/// `rsrch_1` → (`rsrch`, `1`); a name without a numeric `_N` suffix → (name, `0`).
fn split_msr_volume(name: &str) -> (&str, &str) {
    match name.rsplit_once('_') {
        Some((host, disk))
            if !host.is_empty() && !disk.is_empty() && disk.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (host, disk)
        }
        _ => (name, "0"),
    }
}

/// Settings of the fio iolog writer.
#[derive(Clone, Debug)]
pub struct IologOptions {
    /// The file (or device) name every I/O is addressed to in the log.
    pub target: String,
    /// When set, offsets are taken modulo this size (rounded down to 512 B), so a trace of a
    /// large volume replays on a small file; I/Os that would cross the end are shortened.
    pub wrap_bytes: Option<u64>,
}

/// Writes a fio iolog, version 2 (`fio --read_iolog`): `add`, `open`, one `read`/`write` line
/// per record, `close`. Version 2 has no timestamps: fio replays as fast as its queue depth
/// allows. Zero-length records are skipped (fio rejects them) and counted.
pub struct IologWriter<W: Write> {
    out: W,
    path: PathBuf,
    options: IologOptions,
    started: bool,
    pub skipped_empty: u64,
    itoa: itoa::Buffer,
}

impl<W: Write> IologWriter<W> {
    pub fn new(out: W, path: &Path, options: IologOptions) -> Result<IologWriter<W>, TraceError> {
        if options.target.is_empty() || options.target.contains(char::is_whitespace) {
            return Err(TraceError::Unwritable {
                index: 0,
                reason: "the iolog target name must be non-empty and without spaces".into(),
            });
        }
        if let Some(wrap) = options.wrap_bytes {
            if wrap < SECTOR_BYTES {
                return Err(TraceError::Unwritable {
                    index: 0,
                    reason: "the wrap size must be at least 512 bytes".into(),
                });
            }
        }
        Ok(IologWriter {
            out,
            path: path.to_owned(),
            options,
            started: false,
            skipped_empty: 0,
            itoa: itoa::Buffer::new(),
        })
    }

    fn io(&self) -> impl Fn(std::io::Error) -> TraceError + '_ {
        |e| TraceError::io(&self.path, e)
    }

    pub fn write(&mut self, record: &Record) -> Result<(), TraceError> {
        if !self.started {
            self.start()?;
        }
        let (offset, mut size) = (record.offset_bytes, record.length_bytes);
        let offset = match self.options.wrap_bytes {
            Some(wrap) => {
                let wrap = wrap / SECTOR_BYTES * SECTOR_BYTES;
                let offset = (offset % wrap) / SECTOR_BYTES * SECTOR_BYTES;
                size = size.min(wrap - offset);
                offset
            }
            None => offset,
        };
        if size == 0 {
            self.skipped_empty += 1;
            return Ok(());
        }
        let mut line = Vec::with_capacity(64);
        line.extend_from_slice(self.options.target.as_bytes());
        line.extend_from_slice(match record.op {
            Op::Read => b" read ",
            Op::Write => b" write ",
        });
        line.extend_from_slice(self.itoa.format(offset).as_bytes());
        line.push(b' ');
        line.extend_from_slice(self.itoa.format(size).as_bytes());
        line.push(b'\n');
        self.out.write_all(&line).map_err(self.io())
    }

    fn start(&mut self) -> Result<(), TraceError> {
        self.started = true;
        let target = &self.options.target;
        let text = format!("fio version 2 iolog\n{target} add\n{target} open\n");
        self.out.write_all(text.as_bytes()).map_err(self.io())
    }

    pub fn finish(mut self) -> Result<W, TraceError> {
        if !self.started {
            self.start()?;
        }
        let text = format!("{} close\n", self.options.target);
        self.out.write_all(text.as_bytes()).map_err(self.io())?;
        self.out.flush().map_err(self.io())?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msr_volume_names_split_at_the_disk_number() {
        assert_eq!(split_msr_volume("rsrch_1"), ("rsrch", "1"));
        assert_eq!(split_msr_volume("src1_2"), ("src1", "2"));
        assert_eq!(split_msr_volume("1058"), ("1058", "0"));
        assert_eq!(split_msr_volume("8,0"), ("8,0", "0"));
        assert_eq!(split_msr_volume("a_b"), ("a_b", "0"));
        assert_eq!(split_msr_volume("_1"), ("_1", "0"));
    }
}
