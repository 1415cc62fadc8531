//! How long the client's own I/O takes, by where it goes: reads, writes and flushes on the base
//! volume's device (submitted to the disk's workers until their completion comes back; reads the
//! page cache answers in place are not timed), and reads, writes and other requests (deletes,
//! probes) to the stores (from the frame handed to the store's link until its reply). With the
//! export's histograms they tell a slow store from a slow base (`volume worst-case`).

use std::collections::HashMap;
use std::time::Instant;

use cordillera_vstore::store::{DiskOp, Request};

use super::metrics::LatencyHistogram;

/// The kinds of I/O timed, in the order of [`IoLatency::histograms`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IoKind {
    BaseRead,
    BaseWrite,
    BaseFlush,
    StoreRead,
    StoreWrite,
    StoreOther,
}

impl IoKind {
    pub(super) const ALL: [IoKind; 6] = [
        IoKind::BaseRead,
        IoKind::BaseWrite,
        IoKind::BaseFlush,
        IoKind::StoreRead,
        IoKind::StoreWrite,
        IoKind::StoreOther,
    ];

    /// Its name in `/status` and, as `cordillera_volume_{name}_seconds`, in `/metrics`.
    pub(super) fn name(self) -> &'static str {
        match self {
            IoKind::BaseRead => "base_read",
            IoKind::BaseWrite => "base_write",
            IoKind::BaseFlush => "base_flush",
            IoKind::StoreRead => "store_read",
            IoKind::StoreWrite => "store_write",
            IoKind::StoreOther => "store_other",
        }
    }

    pub(super) fn help(self) -> &'static str {
        match self {
            IoKind::BaseRead => "Base volume reads submitted to the device, until completed.",
            IoKind::BaseWrite => "Base volume writes submitted to the device, until completed.",
            IoKind::BaseFlush => "Base volume flushes submitted to the device, until completed.",
            IoKind::StoreRead => "Reads sent to a store, until its reply.",
            IoKind::StoreWrite => "Writes (off-loaded copies) sent to a store, until its reply.",
            IoKind::StoreOther => "Deletes and other requests sent to a store, until its reply.",
        }
    }

    fn of_disk(op: &DiskOp) -> IoKind {
        match op {
            DiskOp::Read { .. } => IoKind::BaseRead,
            DiskOp::Write { .. } => IoKind::BaseWrite,
            DiskOp::Flush { .. } => IoKind::BaseFlush,
        }
    }

    fn of_store(request: &Request) -> IoKind {
        match request {
            Request::Read { .. } | Request::ReadAny { .. } => IoKind::StoreRead,
            Request::Write { .. } => IoKind::StoreWrite,
            _ => IoKind::StoreOther,
        }
    }
}

/// The I/O in flight, when each started, and a histogram per [`IoKind`].
#[derive(Default)]
pub(super) struct IoLatency {
    base: HashMap<u64, (Instant, IoKind)>,
    store: HashMap<(usize, u64), (Instant, IoKind)>,
    histograms: [LatencyHistogram; 6],
}

impl IoLatency {
    pub(super) fn base_submitted(&mut self, op: &DiskOp) {
        self.base.insert(
            crate::disk::op_id(op),
            (Instant::now(), IoKind::of_disk(op)),
        );
    }

    /// A base operation completed (`ok`) or failed (not timed).
    pub(super) fn base_done(&mut self, id: u64, ok: bool) {
        if let Some((at, kind)) = self.base.remove(&id) {
            if ok {
                self.record(kind, at);
            }
        }
    }

    pub(super) fn store_sent(&mut self, store: usize, id: u64, request: &Request) {
        self.store
            .insert((store, id), (Instant::now(), IoKind::of_store(request)));
    }

    pub(super) fn store_replied(&mut self, store: usize, id: u64) {
        if let Some((at, kind)) = self.store.remove(&(store, id)) {
            self.record(kind, at);
        }
    }

    /// The store's connection ended: its requests in flight will not be answered on it.
    pub(super) fn store_lost(&mut self, store: usize) {
        self.store.retain(|(s, _), _| *s != store);
    }

    fn record(&mut self, kind: IoKind, at: Instant) {
        self.histograms[kind as usize].record(at.elapsed().as_secs_f64());
    }

    pub(super) fn histogram(&self, kind: IoKind) -> &LatencyHistogram {
        &self.histograms[kind as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_timed_until_its_answer_and_failures_are_not() {
        let mut io = IoLatency::default();
        io.base_submitted(&DiskOp::Read {
            id: 1,
            offset_bytes: 0,
            length_bytes: 4096,
        });
        io.base_submitted(&DiskOp::Flush { id: 2 });
        io.store_sent(
            0,
            1,
            &Request::Read {
                client: 1,
                offset_bytes: 0,
                length_bytes: 4096,
            },
        );
        io.store_sent(
            1,
            1,
            &Request::Read {
                client: 1,
                offset_bytes: 0,
                length_bytes: 4096,
            },
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        io.base_done(1, true);
        io.base_done(2, false);
        io.base_done(3, true);
        io.store_replied(0, 1);
        io.store_lost(1);
        io.store_replied(1, 1);
        let count = |k: IoKind| io.histogram(k).count;
        assert_eq!(count(IoKind::BaseRead), 1);
        assert_eq!(count(IoKind::BaseFlush), 0, "a failed flush is not timed");
        assert_eq!(count(IoKind::StoreRead), 1, "the lost store's read is not");
        assert!(io.histogram(IoKind::BaseRead).sum_s >= 0.02);
        assert!(io.base.is_empty() && io.store.is_empty());
    }
}
