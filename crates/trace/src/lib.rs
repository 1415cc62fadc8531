//! Block traces: read any real trace format into one [`Record`] type, store traces compactly,
//! write them back out, and characterize them the way the papers do.
//!
//! # Layout
//!
//! Reading:
//! - [`record`]: [`Record`], [`VolumeTable`], [`TraceInfo`] — what every reader produces.
//! - [`format`]: the [`Format`]s.
//! - [`parse`]: one pure line parser per text format (fuzzed).
//! - [`detect`]: a text format judged from a trace's first lines.
//! - [`reader`]: [`RecordReader`], what every reader offers, and [`ReadOptions`].
//! - [`read`]: [`open`] a file (decompression, detection) and the streaming text reader.
//! - [`binary`]: the compact binary format, reader and writer (`docs/FORMATS.md`).
//! - [`write`]: MSR CSV and fio iolog writers.
//! - [`oracle`]: libCacheSim's `oracleGeneral` binary traces, read and written.
//!
//! Characterizing (each a builder fed one record at a time, then `finish`ed into a
//! serializable report):
//! - [`stats`]: counts, rates, working set, reaccess percentage.
//! - [`peaks`]: peak episodes (Everest §2, Table 1) and writes in slow intervals (Figure 2).
//! - [`reaccess`]: temporal classes, reuse distance, spatial clustering (Bonfire §3).
//! - [`profile`]: load by hour of day and by day, time at each fraction of peak (Sierra §2).
//!
//! Support: [`window`] (time-window counters), [`reuse`] (exact reuse distance), [`synth`]
//! (a built-in synthetic trace), [`merge`] (several traces read as one, in time order),
//! [`limits`], [`error`], [`ordered`] (records put in time order within a bounded window).

pub mod binary;
pub mod detect;
pub mod error;
pub mod format;
pub mod limits;
pub mod merge;
pub mod oracle;
pub mod ordered;
pub mod parse;
pub mod peaks;
pub mod profile;
pub mod reaccess;
pub mod read;
pub mod reader;
pub mod record;
pub mod reuse;
pub mod stats;
pub mod synth;
pub mod window;
pub mod write;

pub use error::TraceError;
pub use format::{Format, TimeUnit};
pub use read::open;
pub use reader::{ReadOptions, RecordReader};
pub use record::{ReadSummary, Record, TraceInfo, VolumeId, VolumeTable};
