//! Space and cleaning: how much of the log is free, when to clean, and moving the live records
//! at the tail forward to the head.

use super::*;

impl Store {
    /// Free bytes between the head and the durable tail.
    pub(super) fn free_bytes(&self) -> u64 {
        self.config.log_bytes - self.used_bytes
    }

    /// The room cleaning needs to copy any kept data record forward: writes and deletes leave
    /// it free, so that space pressure can always move the tail.
    pub(super) fn clean_room(&self) -> u64 {
        self.data_sizes.keys().next_back().copied().unwrap_or(0)
    }

    /// Bytes the tail passed that a durable tail pointer gives back.
    pub(super) fn passed_bytes(&self) -> u64 {
        self.passed_total
    }

    /// Garbage ahead of the tail that cleaning can give back: bytes kept that neither hold live
    /// data nor belong to records not yet applied.
    pub(super) fn cleanable_bytes(&self) -> u64 {
        self.used_bytes
            .saturating_sub(self.passed_bytes() + self.live_cost + self.unapplied_bytes)
    }

    /// Cleaning is worth a pass only when it gives back at least this much (less is churn).
    pub(super) fn clean_threshold(&self) -> u64 {
        (self.config.reserve_bytes / 2).max(2 * RECORD_ALIGN)
    }

    /// Whether space runs short: requests wait for it, or writes would soon be refused.
    pub(super) fn space_short(&self) -> bool {
        !self.waiting.is_empty()
            || self.free_bytes() < 2 * self.config.reserve_bytes + self.clean_room()
    }

    /// Copies the live pieces of the tail record forward when space runs short and the log
    /// holds garbage, so the tail can pass it (Everest's stores are logs: a record still
    /// holding a few live bytes would otherwise pin the whole log behind it). The copies keep
    /// client, volume, range and version; a copy replaces its source in the index (an equal
    /// version from a later record wins), so reads, deletes and recovery see the same data.
    /// When cleaning cannot make room, waiting writes are refused (`Full`).
    pub(super) fn clean(&mut self) {
        if !self.is_ready() || self.cleaning.is_some() || self.ack_cursor < self.clean_until {
            return;
        }
        if !self.space_short() {
            return;
        }
        if !self.passed.is_empty() {
            self.persist_tail();
        }
        let Some((seq, info)) = self.records.first() else {
            return;
        };
        if seq >= self.ack_cursor {
            return; // the log is all in flight: it drains by itself
        }
        debug_assert!(info.header.kind == RecordKind::Data && info.live_bytes > 0);
        if self.cleanable_bytes() < self.clean_threshold() {
            self.refuse_waiting_writes();
            return;
        }
        let h = info.header;
        let ranges: Vec<crate::index::Range> = self
            .indexes
            .get(&h.client)
            .map(|ix| ix.lookup(h.offset_bytes, h.offset_bytes + h.length_bytes))
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.record == seq)
            .collect();
        if ranges.is_empty() {
            return;
        }
        self.cleaning = Some(seq);
        self.start_pieces(u64::MAX, ranges, false, Some(seq));
    }

    /// Space cannot come back for writes: the waiting ones are refused (deletes keep waiting,
    /// as reclaim must always make progress).
    pub(super) fn refuse_waiting_writes(&mut self) {
        if self.superblock_in_flight.is_some() || !self.passed.is_empty() {
            return; // space still comes back
        }
        let waiting = std::mem::take(&mut self.waiting);
        for (id, request) in waiting {
            if matches!(request, Request::Write { .. }) {
                self.stats.full_refusals += 1;
                self.replies.push_back((id, Reply::Error(StoreError::Full)));
            } else {
                self.waiting.push_back((id, request));
            }
        }
    }

    /// The cleaning read of record `source` is back: appends copies of the pieces still live
    /// in it. Pieces that a record not yet applied overlaps stay (that record may remove
    /// them; a copy appended after it would bring them back).
    pub(super) fn finish_clean(&mut self, source: u64, pieces: Vec<(Extent, Vec<u8>)>) {
        self.cleaning = None;
        let Some(info) = self.records.get(source).copied() else {
            return;
        };
        let h = info.header;
        let Some(ix) = self.indexes.get(&h.client) else {
            return;
        };
        let live: Vec<crate::index::Range> = ix
            .lookup(h.offset_bytes, h.offset_bytes + h.length_bytes)
            .into_iter()
            .filter(|r| r.record == source)
            .collect();
        let busy: Vec<(u64, u64)> = self
            .records
            .from(self.ack_cursor)
            .map(|(_, r)| r.header)
            .filter(|o| o.client == h.client && o.kind != RecordKind::Wrap)
            .map(|o| (o.offset_bytes, o.offset_bytes + o.length_bytes))
            .collect();
        let mut copies: Vec<(u64, u64, u64, &[u8])> = Vec::new();
        for r in &live {
            for (start, end) in subtract(r.start, r.end, &busy) {
                // Bytes only ever leave a record, so a live piece lies within one read.
                let Some((e, data)) = pieces.iter().find(|(e, _)| {
                    e.offset_bytes <= start && end <= e.offset_bytes + e.length_bytes
                }) else {
                    continue;
                };
                let at = (start - e.offset_bytes) as usize;
                copies.push((
                    start,
                    end,
                    r.version,
                    &data[at..at + (end - start) as usize],
                ));
            }
        }
        // All copies or none: the source passes only when every live piece has moved.
        let mut head = self.head;
        let mut need = 0;
        for (start, end, _, _) in &copies {
            let total = record_total_bytes(end - start);
            if head + total > self.config.log_bytes {
                need += self.config.log_bytes - head;
                head = 0;
            }
            need += total;
            head += total;
        }
        if copies.is_empty() || need > self.free_bytes() {
            if need > self.free_bytes() {
                self.refuse_waiting_writes();
            }
            return;
        }
        let copies: Vec<(u64, u64, u64, Vec<u8>)> = copies
            .into_iter()
            .map(|(s, e, v, d)| (s, e, v, d.to_vec()))
            .collect();
        for (start, end, version, data) in copies {
            let total = record_total_bytes(end - start);
            if self.head + total > self.config.log_bytes {
                let filler = self.config.log_bytes - self.head;
                self.push_record(RecordKind::Wrap, 0, 0, 0, 0, 0, Vec::new(), filler, None);
            }
            self.push_record(
                RecordKind::Data,
                h.client,
                h.volume,
                start,
                end - start,
                version,
                data,
                total,
                None,
            );
            self.stats.cleaned_bytes += end - start;
        }
        self.stats.cleaned_records += 1;
        self.clean_until = self.next_seq;
    }

    /// Retries requests waiting for space, in arrival order, up to the first write that must
    /// still wait: the requests behind it keep waiting untried (room comes back for the
    /// oldest write first, and a drain costs the requests it settles plus one, however many
    /// wait). Deletes commute with one another, so a delete may pass waiting deletes, but
    /// never a waiting write (it may be what the delete removes).
    pub(super) fn drain_waiting(&mut self) {
        let mut kept = Vec::new();
        while let Some((id, request)) = self.waiting.pop_front() {
            let is_write = matches!(request, Request::Write { .. });
            self.stats.waiting_retries += 1;
            if let Some(wait) = self.append(id, request) {
                kept.push(wait);
                if is_write {
                    break;
                }
            }
        }
        for wait in kept.into_iter().rev() {
            self.waiting.push_front(wait);
        }
        if !self.waiting.is_empty() {
            self.persist_tail();
        }
        self.answer_barriers();
        self.clean();
    }
}
