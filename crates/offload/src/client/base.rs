//! Completions of base-volume I/O.

use super::*;

impl Client {
    pub(super) fn base_step(&mut self, now: Nanos, done: BaseDone) {
        self.now = now;
        if matches!(self.phase, Phase::Fenced) {
            return;
        }
        let id = match &done {
            BaseDone::Read { id, .. }
            | BaseDone::Written { id }
            | BaseDone::Failed { id, .. }
            | BaseDone::Error { id, .. } => *id,
        };
        let Some(kind) = self.base_pending.remove(&id) else {
            return;
        };
        self.local_write_ended(id);
        match (kind, done) {
            (BaseKind::LocalCopy { key }, BaseDone::Written { .. }) => {
                self.base_in_flight -= 1;
                self.local_copy_done(key, true);
            }
            (BaseKind::LocalCopy { key }, BaseDone::Error { .. } | BaseDone::Failed { .. }) => {
                // Only the copy fails: the write's copies on the stores are what count.
                self.base_in_flight -= 1;
                self.stats.base_errors += 1;
                self.local_copy_done(key, false);
            }
            (BaseKind::LocalCopy { .. }, BaseDone::Read { .. }) => {
                unreachable!("a local copy completed as a read")
            }
            (BaseKind::UpWrite { up_id, start, .. }, BaseDone::Failed { data, .. }) => {
                // Some replicas (or sectors) may hold it, in any order with newer writes issued
                // meanwhile. Unacknowledged, it may take effect now: it is off-loaded whole
                // with a fresh version and wins over every write issued while it was in
                // flight, so the map, not the base's landing order, decides what is read.
                // (Letting those newer writes keep their bytes left the stores that took this
                // one holding a copy newer by version than the one the map names: a store
                // answers a read with its newest copy, so reads flipped between the two.)
                self.base_in_flight -= 1;
                self.stats.base_writes_failed += 1;
                self.vulnerable
                    .extend(std::mem::take(&mut self.vulnerable_after_base));
                let version = self.next_version();
                let key = self.id();
                debug_assert!(
                    !self.writes.contains_key(&key),
                    "write key {key} given out twice"
                );
                self.writes.insert(
                    key,
                    WriteOp {
                        up_id,
                        start,
                        data,
                        durable: true,
                        version,
                        waiting: 0,
                        succeeded: 0,
                        tried: 0,
                        asked: 0,
                        superseded: Vec::new(),
                        full_since: None,
                        short_since: None,
                        answered: false,
                        arrived: self.now,
                    },
                );
                self.place_write(key);
            }
            (BaseKind::UpWrite { up_id, .. }, BaseDone::Error { no_space, .. }) => {
                // Only this write fails; nothing was recorded for it but its place in flight.
                self.base_in_flight -= 1;
                self.stats.base_errors += 1;
                self.upward_out
                    .push_back((up_id, UpReply::Error(ClientError::Base { no_space })));
                self.vulnerable
                    .extend(std::mem::take(&mut self.vulnerable_after_base));
            }
            (BaseKind::UpWrite { up_id, .. }, _) => {
                self.base_in_flight -= 1;
                self.upward_out.push_back((up_id, UpReply::Written));
                self.vulnerable
                    .extend(std::mem::take(&mut self.vulnerable_after_base));
            }
            (BaseKind::UpRead { read, start, keep }, BaseDone::Read { data, .. }) => {
                self.base_in_flight -= 1;
                self.base_read_done(read, start, data, &keep);
                self.read_piece_finished(read);
            }
            (BaseKind::UpRead { read, .. }, BaseDone::Error { no_space, .. }) => {
                self.base_in_flight -= 1;
                self.stats.base_errors += 1;
                let op = self.reads.get_mut(&read).expect("read");
                op.error.get_or_insert(ClientError::Base { no_space });
                op.whole_base = false;
                self.read_piece_finished(read);
            }
            (BaseKind::Reclaim { job, run }, BaseDone::Failed { .. }) => {
                self.base_in_flight -= 1;
                self.reclaim_failed(job, run);
            }
            (BaseKind::Reclaim { job, run }, BaseDone::Error { .. }) => {
                self.base_in_flight -= 1;
                self.stats.base_errors += 1;
                self.reclaim_failed(job, run);
            }
            (BaseKind::Superblock, BaseDone::Error { .. }) => {
                self.stats.base_errors += 1;
                self.superblock_io_failed();
            }
            (BaseKind::Reclaim { job, .. }, _) => {
                self.base_in_flight -= 1;
                self.reclaim_written(job);
            }
            (BaseKind::Superblock, BaseDone::Read { data, .. }) => self.superblock_read(&data),
            (BaseKind::Superblock, BaseDone::Written { .. }) => {
                self.superblock_written();
                match &mut self.phase {
                    Phase::Formatting => self.become_ready(),
                    Phase::Fetching(f) => {
                        f.superblock_written = true;
                        self.maybe_finish_fetch();
                    }
                    _ => {}
                }
            }
            (BaseKind::UpRead { .. }, BaseDone::Written { .. } | BaseDone::Failed { .. }) => {
                unreachable!("a read completed as a write")
            }
            (BaseKind::Superblock, BaseDone::Failed { .. }) => {
                // The driver retries superblock writes itself (Sierra keeps the superblock in
                // the metadata service): a failure here is a driver's bug.
                unreachable!("a superblock write failed")
            }
        }
        self.pump();
    }

    pub(super) fn become_ready(&mut self) {
        self.phase = Phase::Ready;
        while let Some((id, request)) = self.queued_upward.pop_front() {
            self.start_upward(id, request);
        }
    }
}
