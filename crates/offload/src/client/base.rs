//! Completions of base-volume I/O.

use super::*;

impl Client {
    pub(super) fn base_step(&mut self, now: Nanos, done: BaseDone) {
        self.now = now;
        let id = match &done {
            BaseDone::Read { id, .. } | BaseDone::Written { id } => *id,
        };
        let Some(kind) = self.base_pending.remove(&id) else {
            return;
        };
        match (kind, done) {
            (BaseKind::UpWrite { up_id }, _) => {
                self.base_in_flight -= 1;
                self.upward_out.push_back((up_id, UpReply::Written));
            }
            (BaseKind::UpRead { read, start }, BaseDone::Read { data, .. }) => {
                self.base_in_flight -= 1;
                let len = data.len();
                self.read_piece_done(read, start, data, 0, len);
                self.read_piece_finished(read);
            }
            (BaseKind::Reclaim { job }, _) => {
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
            (BaseKind::UpRead { .. }, BaseDone::Written { .. }) => {
                unreachable!("a read completed as a write")
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
