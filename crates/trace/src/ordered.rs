//! Records put in time order: some traces are written in completion order (Tencent CBS,
//! SYSTOR'17), so a request may appear after later ones, or before the first line's time.
//! [`InTimeOrder`] holds records for a bounded window and passes them on sorted by time, with
//! times counted from the earliest record; a record more out of order than the window is an
//! error that says to sort the trace, never a silently negative time.
//!
//! Memory: at most [`InTimeOrder::RECORDS_MAX`] records held. A trace already in order costs one
//! push and one pop of a ring buffer per record.

use std::collections::VecDeque;

use crate::error::TraceError;
use crate::record::{ReadSummary, Record, TraceInfo, VolumeTable};
use crate::RecordReader;

pub struct InTimeOrder {
    inner: Box<dyn RecordReader>,
    window_ns: i64,
    /// Held records, sorted by time (ties in arrival order).
    held: VecDeque<Record>,
    /// The latest time read so far.
    newest_ns: i64,
    /// The time of the last record passed on (`None` before the first).
    passed_ns: Option<i64>,
    /// Subtracted from every time: the first record passed on is at 0.
    shift_ns: i64,
    read: u64,
    reordered: u64,
    info: TraceInfo,
    summary: ReadSummary,
    done: bool,
}

impl InTimeOrder {
    /// Records held at most; past it the earliest is passed on early.
    pub const RECORDS_MAX: usize = 1 << 20;
    /// The default window: a minute.
    pub const WINDOW_NS: i64 = 60_000_000_000;

    pub fn new(inner: Box<dyn RecordReader>, window_ns: i64) -> InTimeOrder {
        assert!(window_ns >= 0);
        InTimeOrder {
            info: inner.info().clone(),
            summary: inner.summary().clone(),
            inner,
            window_ns,
            held: VecDeque::new(),
            newest_ns: i64::MIN,
            passed_ns: None,
            shift_ns: 0,
            read: 0,
            reordered: 0,
            done: false,
        }
    }

    fn hold(&mut self, record: Record) -> Result<(), TraceError> {
        self.read += 1;
        if let Some(passed) = self.passed_ns {
            if record.time_ns < passed {
                return Err(TraceError::OutOfOrder {
                    record: self.read,
                    behind_s: (passed - record.time_ns) as f64 / 1e9,
                    window_s: self.window_ns as f64 / 1e9,
                    records_max: Self::RECORDS_MAX,
                });
            }
        }
        if record.time_ns < self.newest_ns {
            self.reordered += 1;
            let at = self.held.partition_point(|r| r.time_ns <= record.time_ns);
            self.held.insert(at, record);
        } else {
            self.newest_ns = record.time_ns;
            self.held.push_back(record);
        }
        Ok(())
    }

    /// The earliest held record, if the window (or the end of the input, or the bound) lets it go.
    fn release(&mut self) -> Option<Record> {
        let front = self.held.front()?;
        let ripe = self.done
            || self.held.len() > Self::RECORDS_MAX
            || (self.newest_ns as i128 - front.time_ns as i128) > self.window_ns as i128;
        if !ripe {
            return None;
        }
        let mut record = self.held.pop_front()?;
        if self.passed_ns.is_none() {
            self.shift_ns = record.time_ns;
            if let Some(origin) = self.info.origin_unix_ns.as_mut() {
                *origin = origin.saturating_add(record.time_ns);
            }
        }
        self.passed_ns = Some(record.time_ns);
        record.time_ns -= self.shift_ns;
        Some(record)
    }

    fn refresh(&mut self) {
        let origin = self.info.origin_unix_ns;
        self.info = self.inner.info().clone();
        // Once a record is passed on the origin is shifted to it; before, the inner reader's.
        if self.passed_ns.is_some() {
            self.info.origin_unix_ns = origin;
        }
        self.summary = self.inner.summary().clone();
        self.summary.reordered = self.reordered;
    }
}

impl RecordReader for InTimeOrder {
    fn info(&self) -> &TraceInfo {
        &self.info
    }

    fn volumes(&self) -> &VolumeTable {
        self.inner.volumes()
    }

    /// The summary's counts are the inner reader's as of the last refresh: at the first record
    /// and at the end of the trace.
    fn summary(&self) -> &ReadSummary {
        &self.summary
    }

    fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        loop {
            if let Some(record) = self.release() {
                return Ok(Some(record));
            }
            if self.done {
                self.refresh();
                return Ok(None);
            }
            match self.inner.next_record()? {
                Some(record) => {
                    self.hold(record)?;
                    if self.read == 1 {
                        self.refresh();
                    }
                }
                None => self.done = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::VolumeId;
    use cordillera_types::Op;

    struct Fixed(Vec<Record>, TraceInfo, VolumeTable, ReadSummary);

    impl RecordReader for Fixed {
        fn info(&self) -> &TraceInfo {
            &self.1
        }
        fn volumes(&self) -> &VolumeTable {
            &self.2
        }
        fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
            Ok((!self.0.is_empty()).then(|| self.0.remove(0)))
        }
        fn summary(&self) -> &ReadSummary {
            &self.3
        }
    }

    fn reader(times: &[i64]) -> Box<dyn RecordReader> {
        let records = times
            .iter()
            .enumerate()
            .map(|(i, t)| Record {
                time_ns: *t,
                volume: VolumeId(0),
                op: Op::Read,
                offset_bytes: i as u64 * 4096,
                length_bytes: 4096,
                response_ns: None,
            })
            .collect();
        let info = TraceInfo {
            format: crate::Format::Tencent,
            origin_unix_ns: Some(1_000_000),
            has_time: true,
            last_line_unterminated: false,
        };
        Box::new(Fixed(
            records,
            info,
            VolumeTable::new(),
            ReadSummary::default(),
        ))
    }

    fn drain(r: &mut InTimeOrder) -> Result<Vec<(i64, u64)>, TraceError> {
        let mut out = Vec::new();
        while let Some(x) = r.next_record()? {
            out.push((x.time_ns, x.offset_bytes / 4096));
        }
        Ok(out)
    }

    #[test]
    fn records_come_out_sorted_from_the_earliest_and_counted() {
        let mut r = InTimeOrder::new(reader(&[0, 5, -3, 2, 2, 9, 7]), 10);
        let out = drain(&mut r).unwrap();
        assert_eq!(
            out,
            vec![(0, 2), (3, 0), (5, 3), (5, 4), (8, 1), (10, 6), (12, 5)]
        );
        assert_eq!(r.summary().reordered, 4);
        assert_eq!(r.info().origin_unix_ns, Some(1_000_000 - 3));
    }

    #[test]
    fn a_record_older_than_the_window_is_refused() {
        let mut r = InTimeOrder::new(reader(&[0, 100, 200, 50]), 10);
        let e = drain(&mut r).unwrap_err();
        assert!(matches!(e, TraceError::OutOfOrder { record: 4, .. }), "{e}");
        // Within the window it is sorted.
        let mut r = InTimeOrder::new(reader(&[0, 100, 200, 195]), 10);
        assert_eq!(drain(&mut r).unwrap().len(), 4);
    }

    #[test]
    fn an_ordered_trace_passes_unchanged() {
        let times: Vec<i64> = (0..1000).map(|i| i * 7).collect();
        let mut r = InTimeOrder::new(reader(&times), 50);
        let out = drain(&mut r).unwrap();
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), times);
        assert_eq!(r.summary().reordered, 0);
    }
}
