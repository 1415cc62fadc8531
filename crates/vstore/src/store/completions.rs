//! Disk completions: group commit, acknowledgements once records are durable, the index
//! updated, the tail advanced, superblocks and reads done.

use super::*;

impl Store {
    pub(super) fn handle_disk_step(&mut self, now: Nanos, done: DiskDone) {
        self.last_activity = now;
        match done {
            DiskDone::Written { id } => {
                if let Some((seq, durable)) = self.io_records.remove(&id) {
                    let r = self.records.get_mut(seq).expect("record being written");
                    if durable {
                        r.state = RecordState::Durable;
                        self.stats.flushes += 1;
                        self.acknowledge();
                    } else {
                        r.state = RecordState::Written;
                        self.written_unflushed.push(seq);
                    }
                }
            }
            DiskDone::Flushed { id } => {
                if self
                    .superblock_flushing
                    .as_ref()
                    .is_some_and(|(f, _)| *f == id)
                {
                    let (_, sb) = self.superblock_flushing.take().expect("superblock flush");
                    if matches!(self.phase, Phase::Formatting) {
                        self.phase = Phase::Ready;
                    }
                    self.superblock_durable(sb);
                } else if self.flush_in_flight.as_ref().is_some_and(|(f, _)| *f == id) {
                    let (_, covered) = self.flush_in_flight.take().expect("flush");
                    self.stats.flushes += 1;
                    for seq in covered {
                        self.records.get_mut(seq).expect("flushed record").state =
                            RecordState::Durable;
                    }
                    self.acknowledge();
                }
            }
            DiskDone::Read { id, data } => {
                if let Some((key, index)) = self.io_reads.remove(&id) {
                    if key == u64::MAX {
                        self.superblock_read(now, data);
                    } else if key == u64::MAX - 1 {
                        self.scan_read(now, id, data);
                    } else {
                        self.piece_read(key, index, data);
                    }
                }
            }
        }
    }

    /// Group commit: one flush at a time covers every record whose write completed before it
    /// was issued. Called when the driver polls, so that writes completing together (a merged
    /// transfer) share one flush.
    pub(super) fn start_flush(&mut self) {
        if self.flush_in_flight.is_some() || self.written_unflushed.is_empty() {
            return;
        }
        let id = self.io_id();
        let covered = std::mem::take(&mut self.written_unflushed);
        self.flush_in_flight = Some((id, covered));
        self.disk.push_back(DiskOp::Flush { id });
    }

    /// Acknowledges durable records in log order, applies them to the index, and moves the tail
    /// over stale records.
    pub(super) fn acknowledge(&mut self) {
        if self.unrecorded_epoch.is_some() {
            return;
        }
        while let Some(info) = self.records.get(self.ack_cursor).copied() {
            if info.state != RecordState::Durable {
                break;
            }
            debug_assert_eq!(
                info.header.seq, self.ack_cursor,
                "a record filed out of order"
            );
            self.apply(info.header);
            if let Some(request) = info.request {
                self.answer_done(request, info.header.client);
                self.stats.requests_in_flight -= 1;
            }
            self.ack_cursor += 1;
            self.unapplied_bytes -= info.total_bytes;
        }
        self.advance_tail();
        self.answer_barriers();
        self.clean();
    }

    /// Applies a durable record to its client's index.
    pub(super) fn apply(&mut self, h: RecordHeader) {
        let deltas = match h.kind {
            RecordKind::Data => self.indexes.entry(h.client).or_default().write(
                h.offset_bytes,
                h.offset_bytes + h.length_bytes,
                h.version,
                h.seq,
            ),
            RecordKind::Delete => self.indexes.entry(h.client).or_default().delete(
                h.offset_bytes,
                h.offset_bytes + h.length_bytes,
                h.version,
            ),
            RecordKind::Wrap => Vec::new(),
        };
        for LiveDelta { record, bytes } in deltas {
            let info = self
                .records
                .get_mut(record)
                .expect("index names a kept record");
            let before = info.live_bytes;
            debug_assert!(
                info.live_bytes as i64 + bytes >= 0
                    && info.live_bytes as i64 + bytes <= info.header.length_bytes as i64,
                "record {record}: {} live bytes {bytes:+} outside its {} bytes",
                info.live_bytes,
                info.header.length_bytes
            );
            info.live_bytes = (info.live_bytes as i64 + bytes) as u64;
            self.live_cost = self.live_cost - live_cost(before) + live_cost(info.live_bytes);
            let set = self.live_by_client.entry(info.header.client).or_default();
            if info.live_bytes > 0 {
                set.insert(record);
            } else {
                set.remove(&record);
                if let Some(offered) = self.offered.get_mut(&info.header.client) {
                    offered.remove(&record);
                }
            }
        }
    }

    pub(super) fn advance_tail(&mut self) {
        while let Some((seq, info)) = self.records.first().map(|(s, i)| (s, *i)) {
            let stale = seq < self.ack_cursor
                && (info.header.kind != RecordKind::Data || info.live_bytes == 0);
            if !stale {
                break;
            }
            self.passed.push_back((seq, info.total_bytes));
            self.passed_total += info.total_bytes;
            self.records.pop_first();
            if info.header.kind == RecordKind::Data {
                let count = self
                    .data_sizes
                    .get_mut(&info.total_bytes)
                    .expect("a kept data record's size");
                *count -= 1;
                if *count == 0 {
                    self.data_sizes.remove(&info.total_bytes);
                }
            }
        }
    }

    pub(super) fn superblock_durable(&mut self, sb: Superblock) {
        self.superblock_in_flight = None;
        if self.unrecorded_epoch == Some(sb.tail_epoch) {
            self.unrecorded_epoch = None;
            self.acknowledge();
        }
        while self
            .passed
            .front()
            .is_some_and(|(seq, _)| *seq < sb.tail_seq)
        {
            let (_, bytes) = self.passed.pop_front().expect("passed record");
            self.used_bytes -= bytes;
            self.passed_total -= bytes;
        }
        if sb.generation > self.durable.generation {
            self.durable = sb;
        }
        // Fences set while this one was in flight; metadata answers waiting for them.
        self.persist_fences();
        self.answer_barriers();
        // Space may have come back.
        self.drain_waiting();
        let deferred = std::mem::take(&mut self.deferred_reads);
        for (id, request) in deferred {
            self.handle_request(self.last_activity, id, request);
        }
    }

    pub(super) fn piece_read(&mut self, key: u64, index: usize, data: Vec<u8>) {
        let pending = self.reads.get_mut(&key).expect("read");
        debug_assert_eq!(
            data.len() as u64,
            pending.pieces[index].0.length_bytes,
            "a piece read of the wrong length"
        );
        let first = pending.pieces[index].1.replace(data).is_none();
        debug_assert!(first, "piece {index} of read {key} answered twice");
        pending.outstanding -= 1;
        if pending.outstanding > 0 {
            return;
        }
        let pending = self.reads.remove(&key).expect("read");
        let pieces: Vec<(Extent, Vec<u8>)> = pending
            .pieces
            .into_iter()
            .map(|(e, d)| (e, d.expect("piece read")))
            .collect();
        if let Some(source) = pending.clean {
            self.finish_clean(source, pieces);
            if self.reads.is_empty() && !self.waiting.is_empty() {
                self.persist_tail();
            }
            return;
        }
        let reply = if pending.any {
            Reply::ReadAny(pieces.into_iter().next())
        } else {
            Reply::Read(pieces)
        };
        self.replies.push_back((pending.request, reply));
        if self.reads.is_empty() && !self.waiting.is_empty() {
            self.persist_tail();
        }
    }
}
