//! The one record type every reader produces, and the context that gives it meaning.

use cordillera_types::Op;
use rustc_hash::FxHashMap;

use crate::format::Format;

/// A dense, per-trace volume number. Its name lives in the trace's [`VolumeTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VolumeId(pub u32);

impl VolumeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One block I/O of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Time since the trace start (the first record of the file), in ns. Negative only in traces
    /// recorded out of order (Tencent CBS and SYSTOR'17 are ordered by completion, so a request
    /// may start slightly before the first line's); readers never reorder.
    pub time_ns: i64,
    pub volume: VolumeId,
    pub op: Op,
    pub offset_bytes: u64,
    pub length_bytes: u64,
    /// The response time the trace recorded, for formats that record one (MSR, SYSTOR'17).
    pub response_ns: Option<u64>,
}

/// Volume names in order of first appearance; a [`VolumeId`] indexes it.
#[derive(Clone, Debug, Default)]
pub struct VolumeTable {
    names: Vec<String>,
    ids: FxHashMap<Vec<u8>, VolumeId>,
}

impl VolumeTable {
    pub fn new() -> VolumeTable {
        VolumeTable::default()
    }

    /// The id of `name`, adding it when new. Returns `None` when the table is full
    /// ([`crate::limits::VOLUMES_MAX`]) or the name is not UTF-8.
    pub fn intern(&mut self, name: &[u8]) -> Option<VolumeId> {
        if let Some(id) = self.ids.get(name) {
            return Some(*id);
        }
        if self.names.len() >= crate::limits::VOLUMES_MAX {
            return None;
        }
        let text = std::str::from_utf8(name).ok()?;
        let id = VolumeId(self.names.len() as u32);
        self.names.push(text.to_owned());
        self.ids.insert(name.to_vec(), id);
        Some(id)
    }

    pub fn name(&self, id: VolumeId) -> &str {
        &self.names[id.index()]
    }

    pub fn lookup(&self, name: &str) -> Option<VolumeId> {
        self.ids.get(name.as_bytes()).copied()
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = (VolumeId, &str)> {
        self.names
            .iter()
            .enumerate()
            .map(|(i, n)| (VolumeId(i as u32), n.as_str()))
    }
}

/// What a reader knows about its trace as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceInfo {
    pub format: Format,
    /// Wall-clock time of the trace start (Unix ns, UTC), for formats with absolute timestamps
    /// (MSR, Tencent CBS, SYSTOR'17). Known once the first record has been read.
    pub origin_unix_ns: Option<i64>,
    /// False for formats without timestamps (ARC `.lis`): every record then has time 0.
    pub has_time: bool,
    /// The text trace's last line had no newline (so a conversion back to text can reproduce the
    /// file byte for byte). Known at the end of the trace.
    pub last_line_unterminated: bool,
}

/// Counts a reader keeps while it reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadSummary {
    /// Lines (text formats) or records (binary) consumed.
    pub lines: u64,
    /// Records returned to the caller.
    pub records: u64,
    /// Malformed lines skipped under `--skip-invalid`.
    pub invalid_skipped: u64,
    /// The first malformed line skipped, as an example for the report.
    pub first_invalid: Option<String>,
    /// Records that arrived before one already read (timestamps out of order), put in time
    /// order by [`crate::ordered::InTimeOrder`].
    pub reordered: u64,
    /// How the unit of an ASCII5 trace's timestamps was chosen (`None` for other formats).
    pub time_unit: Option<crate::detect::TimeUnitChoice>,
    /// A first line that is not a record but a header (its fields are words, not numbers):
    /// skipped, and kept here for the note.
    pub header_skipped: Option<String>,
    /// Well-formed lines that carry no read or write (headers, blkparse events other than
    /// dispatch, SCSI commands other than READ/WRITE, discards).
    pub ignored: u64,
    /// Records of volumes not selected by `--volume`.
    pub filtered_out: u64,
}
