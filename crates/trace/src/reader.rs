//! What every trace reader offers, and how a trace is to be read.

use crate::error::TraceError;
use crate::format::{Format, TimeUnit};
use crate::parse::ParseOptions;
use crate::record::{ReadSummary, Record, TraceInfo, VolumeTable};

/// How to read a trace.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// The format, or `None` to detect it from content.
    pub format: Option<Format>,
    /// The unit of ASCII5 timestamps; `None` judges it from the trace's first lines
    /// ([`crate::detect::detect_time_unit`]) and records how in [`ReadSummary::time_unit`]
    /// (`parse.ascii5_time_unit` is then overwritten with the unit chosen).
    pub time_unit: Option<TimeUnit>,
    pub parse: ParseOptions,
    /// Volumes to keep, by name; empty keeps all.
    pub volumes: Vec<String>,
    /// Skip malformed lines (counted in [`ReadSummary::invalid_skipped`]) instead of failing.
    pub skip_invalid: bool,
}

/// A source of records. Readers never reorder records and never hold more than a bounded
/// amount of the trace in memory.
pub trait RecordReader {
    fn info(&self) -> &TraceInfo;
    fn volumes(&self) -> &VolumeTable;
    /// The next record of a selected volume, `Ok(None)` at the end of the trace.
    fn next_record(&mut self) -> Result<Option<Record>, TraceError>;
    fn summary(&self) -> &ReadSummary;
}
