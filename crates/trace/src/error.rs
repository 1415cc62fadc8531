//! Errors of reading and writing traces. Input is parsed into types and never panics: every
//! problem with a file's content is one of these.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Reading failed part-way: an I/O error, or a compressed stream that is truncated or
    /// corrupt. What was read before is not a complete trace.
    #[error("{path}: {message} (after {records} records)")]
    Read {
        path: PathBuf,
        records: u64,
        message: String,
    },

    /// A line that does not parse in the trace's format.
    #[error("{path}:{line}: {reason}: {text:?}")]
    Malformed {
        path: PathBuf,
        line: u64,
        reason: &'static str,
        text: String,
    },

    #[error("{path}: cannot tell the trace format from its content (first line {first_line:?}); pass --format")]
    UnknownFormat { path: PathBuf, first_line: String },

    /// A binary trace whose bytes are not what was written: bad magic, checksum mismatch,
    /// truncation, an unsupported version.
    #[error("{path}: corrupt binary trace at byte {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },

    #[error("{path}: more than {max} volumes", max = crate::limits::VOLUMES_MAX)]
    TooManyVolumes { path: PathBuf },

    /// Traces that cannot be read together (merging one with a wall clock and one without).
    #[error("{0}")]
    Incompatible(String),

    /// A record earlier than one already passed on by a reader that puts records in time order
    /// within a bounded window ([`crate::ordered::InTimeOrder`]).
    #[error("record {record}: its time is {behind_s:.3} s before a record already passed on, more out of order than the {window_s} s (or {records_max} records) the reader sorts within; sort the trace by time first")]
    OutOfOrder {
        record: u64,
        behind_s: f64,
        window_s: f64,
        records_max: usize,
    },

    /// A record that the output format cannot express.
    #[error("cannot write record {index}: {reason}")]
    Unwritable { index: u64, reason: String },
}

impl TraceError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> TraceError {
        TraceError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Most readers truncate the quoted text of a malformed line to this many bytes so an error
/// about a binary file fed as text stays readable.
pub const QUOTED_TEXT_BYTES_MAX: usize = 200;

pub(crate) fn quote(line: &[u8]) -> String {
    let cut = &line[..line.len().min(QUOTED_TEXT_BYTES_MAX)];
    let mut text = String::from_utf8_lossy(cut).into_owned();
    if line.len() > QUOTED_TEXT_BYTES_MAX {
        text.push('…');
    }
    text
}
