//! Several traces read as one, in time order: the volumes of a service traced one file per
//! server (the MSR Cambridge traces are one file per volume) replayed together.
//!
//! Traces with a wall clock are placed on it: each file's times are shifted by its origin's
//! distance from the earliest origin. Traces without one all start at time 0. Mixing the two is
//! an error. A volume name that appears in two files is one volume. Memory: one pending record
//! per file.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::TraceError;
use crate::record::{ReadSummary, Record, TraceInfo, VolumeId, VolumeTable};
use crate::RecordReader;

pub struct Merged {
    readers: Vec<Box<dyn RecordReader>>,
    /// Each file's next record, already shifted, with its volume still the file's own.
    pending: Vec<Option<Record>>,
    /// (time, file) of every pending record, earliest first (ties by file order).
    heads: BinaryHeap<Reverse<(i64, usize)>>,
    shift_ns: Vec<i64>,
    /// Per file: its volume id → the merged id.
    volume_map: Vec<Vec<Option<VolumeId>>>,
    volumes: VolumeTable,
    info: TraceInfo,
    summary: ReadSummary,
}

impl Merged {
    /// Reads the first record of every file to place it on the clock.
    pub fn new(mut readers: Vec<Box<dyn RecordReader>>) -> Result<Merged, TraceError> {
        let mut first = Vec::with_capacity(readers.len());
        for reader in &mut readers {
            first.push(reader.next_record()?);
        }
        let origins: Vec<Option<i64>> = readers.iter().map(|r| r.info().origin_unix_ns).collect();
        let with_clock = origins.iter().filter(|o| o.is_some()).count();
        if with_clock != 0 && with_clock != origins.len() {
            return Err(TraceError::Incompatible(
                "merging traces with a wall clock and traces without one: their times cannot be aligned".into(),
            ));
        }
        let origin = origins.iter().flatten().copied().min();
        let shift_ns: Vec<i64> = origins
            .iter()
            .map(|o| match (o, origin) {
                (Some(o), Some(min)) => o - min,
                _ => 0,
            })
            .collect();
        let info = TraceInfo {
            format: readers
                .first()
                .map(|r| r.info().format)
                .unwrap_or(crate::Format::Binary),
            origin_unix_ns: origin,
            has_time: readers.iter().all(|r| r.info().has_time),
            last_line_unterminated: false,
        };
        let mut merged = Merged {
            volume_map: vec![Vec::new(); readers.len()],
            readers,
            pending: Vec::new(),
            heads: BinaryHeap::new(),
            shift_ns,
            volumes: VolumeTable::new(),
            info,
            summary: ReadSummary::default(),
        };
        for (i, record) in first.into_iter().enumerate() {
            merged.queue(i, record);
        }
        Ok(merged)
    }

    fn queue(&mut self, file: usize, record: Option<Record>) {
        if self.pending.len() <= file {
            self.pending.resize(file + 1, None);
        }
        let record = record.map(|mut r| {
            r.time_ns += self.shift_ns[file];
            r
        });
        if let Some(r) = &record {
            self.heads.push(Reverse((r.time_ns, file)));
        }
        self.pending[file] = record;
    }
}

impl RecordReader for Merged {
    fn info(&self) -> &TraceInfo {
        &self.info
    }

    fn volumes(&self) -> &VolumeTable {
        &self.volumes
    }

    fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        let Some(Reverse((_, file))) = self.heads.pop() else {
            return Ok(None);
        };
        let mut record = self.pending[file].take().expect("a queued record");
        let own = record.volume.index();
        let map = &mut self.volume_map[file];
        if map.len() <= own {
            map.resize(own + 1, None);
        }
        let id = match map[own] {
            Some(id) => id,
            None => {
                let name = self.readers[file].volumes().name(record.volume).to_owned();
                let id = self.volumes.intern(name.as_bytes()).ok_or_else(|| {
                    TraceError::TooManyVolumes {
                        path: "(merged traces)".into(),
                    }
                })?;
                self.volume_map[file][own] = Some(id);
                id
            }
        };
        record.volume = id;
        let next = self.readers[file].next_record()?;
        self.queue(file, next);
        self.summary.records += 1;
        self.summary.lines += 1;
        Ok(Some(record))
    }

    fn summary(&self) -> &ReadSummary {
        &self.summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::from_read;
    use crate::ReadOptions;

    fn msr(text: &'static str) -> Box<dyn RecordReader> {
        from_read(
            std::path::Path::new("test.csv"),
            Box::new(text.as_bytes()),
            &ReadOptions::default(),
        )
        .unwrap()
    }

    /// Two MSR files whose clocks differ by a second merge in time order on the earlier one's
    /// clock, their volumes kept apart.
    #[test]
    fn files_merge_in_time_order_on_the_wall_clock() {
        let a = msr("128166481075232275,rsrch,1,Write,4096,4096,100\n128166481095232275,rsrch,1,Read,0,4096,100\n");
        let b = msr("128166481085232275,wdev,1,Write,8192,4096,100\n");
        let mut merged = Merged::new(vec![a, b]).unwrap();
        let mut seen = Vec::new();
        while let Some(r) = merged.next_record().unwrap() {
            seen.push((r.time_ns, merged.volumes().name(r.volume).to_owned()));
        }
        assert_eq!(
            seen,
            vec![
                (0, "rsrch_1".to_owned()),
                (1_000_000_000, "wdev_1".to_owned()),
                (2_000_000_000, "rsrch_1".to_owned()),
            ]
        );
        assert_eq!(merged.summary().records, 3);
    }
}
