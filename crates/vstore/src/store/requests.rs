//! Requests: writes appended to the log as records, reads and deletes answered from the
//! index, requests waiting for room.

use super::*;

impl Store {
    pub(super) fn handle_request_step(&mut self, now: Nanos, id: u64, request: Request) {
        self.last_activity = now;
        if !self.is_ready() {
            let error = if self.failed() {
                StoreError::NoStore
            } else {
                StoreError::Recovering
            };
            self.replies.push_back((id, Reply::Error(error)));
            return;
        }
        match request {
            Request::Write { .. } | Request::Delete { .. } => {
                // A newer generation on any write or delete ends the client's older lives, as
                // its metadata request does (which this store may never have seen): their
                // requests still in the network are refused from here on.
                let (client, generation) = client_generation(&request);
                self.raise_fence(client, generation);
                if self.waiting.is_empty() {
                    if let Some(wait) = self.append(id, request) {
                        self.waiting.push_back(wait);
                        self.persist_tail();
                    }
                } else {
                    self.waiting.push_back((id, request));
                    self.drain_waiting();
                }
                self.clean();
            }
            Request::Read { .. } | Request::ReadAny { .. }
                if !self.waiting.is_empty()
                    && !self.reads.is_empty()
                    && self.tail_position() != self.durable.tail =>
            {
                self.deferred_reads.push_back((id, request));
            }
            Request::Read {
                client,
                offset_bytes,
                length_bytes,
            } => {
                let Some(end) = offset_bytes.checked_add(length_bytes) else {
                    self.replies
                        .push_back((id, Reply::Error(StoreError::BadRequest)));
                    return;
                };
                let ranges = self
                    .indexes
                    .get(&client)
                    .map(|ix| ix.lookup(offset_bytes, end))
                    .unwrap_or_default();
                self.start_read(id, ranges, false);
            }
            Request::ReadAny { client } => {
                // The oldest live record not yet offered; once all were, offering starts over.
                let offered = self.offered.entry(client).or_default();
                let live = self.live_by_client.get(&client);
                let mut pick = live.and_then(|s| s.iter().find(|seq| !offered.contains(seq)));
                if pick.is_none() {
                    offered.clear();
                    pick = live.and_then(|s| s.iter().next());
                }
                let range = pick.and_then(|&seq| {
                    offered.insert(seq);
                    let h = self.records.get(seq)?.header;
                    self.indexes
                        .get(&client)?
                        .lookup(h.offset_bytes, h.offset_bytes + h.length_bytes)
                        .into_iter()
                        .find(|r| r.record == seq)
                });
                self.start_read(id, range.into_iter().collect(), true);
            }
            Request::Metadata { client, generation } => {
                let generation = self.raise_fence(client, generation);
                let waiting = std::mem::take(&mut self.waiting);
                for (wid, request) in waiting {
                    let theirs = match &request {
                        Request::Write { client: c, .. } | Request::Delete { client: c, .. } => {
                            *c == client
                        }
                        _ => false,
                    };
                    if theirs {
                        self.replies
                            .push_back((wid, Reply::Error(StoreError::Full)));
                    } else {
                        self.waiting.push_back((wid, request));
                    }
                }
                self.barriers.push((id, client, self.next_seq, generation));
                self.drain_waiting();
            }
        }
    }

    /// Raises `client`'s fence to `generation` (never lowers it) and starts making it durable.
    /// Returns the generation answers must wait to be durable for: 0 when the superblock's
    /// table is full and the client is served unfenced, as before fencing existed (counted; see
    /// `Stats::unfenced_metadata`).
    pub(super) fn raise_fence(&mut self, client: u64, generation: u64) -> u64 {
        if generation <= self.fence(client) {
            return generation;
        }
        if !self.fences.contains_key(&client) && self.fences.len() >= FENCES_MAX {
            self.stats.unfenced_metadata += 1;
            return 0;
        }
        self.fences.insert(client, generation);
        self.persist_fences();
        generation
    }

    /// Answers a settled write or delete of `client`, or holds the answer while a fence raised
    /// for the client is not yet durable (a crash would forget it, and the store would take the
    /// older lives' requests again after answering a newer one).
    pub(super) fn answer_done(&mut self, id: u64, client: u64) {
        if self.fence(client) > self.durable_fence(client) {
            self.held_done.push((id, client));
        } else {
            self.replies.push_back((id, Reply::Done));
        }
    }

    /// Answers the metadata requests whose earlier writes and deletes are all settled, and the
    /// writes and deletes held for a fence now durable.
    pub(super) fn answer_barriers(&mut self) {
        let mut i = 0;
        while i < self.held_done.len() {
            let (id, client) = self.held_done[i];
            if self.fence(client) > self.durable_fence(client) {
                i += 1;
                continue;
            }
            self.held_done.remove(i);
            self.replies.push_back((id, Reply::Done));
        }
        let mut i = 0;
        while i < self.barriers.len() {
            let (_, client, below, generation) = self.barriers[i];
            if self.ack_cursor < below || self.durable_fence(client) < generation {
                i += 1;
                continue;
            }
            let (id, client, _, _) = self.barriers.remove(i);
            let extents = self
                .indexes
                .get(&client)
                .map(|ix| ix.ranges().map(|r| self.extent_of(r)).collect())
                .unwrap_or_default();
            self.replies.push_back((id, Reply::Metadata(extents)));
        }
    }

    pub(super) fn extent_of(&self, r: crate::index::Range) -> Extent {
        let volume = self.records.get(r.record).map_or(0, |i| i.header.volume);
        Extent {
            volume,
            offset_bytes: r.start,
            length_bytes: r.end - r.start,
            version: r.version,
        }
    }

    pub(super) fn start_read(&mut self, request: u64, ranges: Vec<crate::index::Range>, any: bool) {
        self.start_pieces(request, ranges, any, None);
    }

    pub(super) fn start_pieces(
        &mut self,
        request: u64,
        ranges: Vec<crate::index::Range>,
        any: bool,
        clean: Option<u64>,
    ) {
        if ranges.is_empty() {
            self.replies.push_back((
                request,
                if any {
                    Reply::ReadAny(None)
                } else {
                    Reply::Read(Vec::new())
                },
            ));
            return;
        }
        let key = self.next_read;
        self.next_read += 1;
        let mut pieces = Vec::new();
        for (i, r) in ranges.iter().enumerate() {
            let info = *self
                .records
                .get(r.record)
                .expect("a record the index names");
            let within = r.start - info.header.offset_bytes;
            let id = self.io_id();
            self.io_reads.insert(id, (key, i));
            self.disk.push_back(DiskOp::Read {
                id,
                offset_bytes: LOG_OFFSET + info.position + HEADER_BYTES as u64 + within,
                length_bytes: r.end - r.start,
            });
            // The record's volume is at hand (`extent_of` would look the record up again).
            let extent = Extent {
                volume: info.header.volume,
                offset_bytes: r.start,
                length_bytes: r.end - r.start,
                version: r.version,
            };
            pieces.push((extent, None));
        }
        let outstanding = pieces.len();
        self.reads.insert(
            key,
            PendingRead {
                request,
                pieces,
                outstanding,
                any,
                clean,
            },
        );
    }

    /// Whether a delete removes live bytes of the oldest record, bringing the moment the tail
    /// can pass it closer: such deletes may use the last of the reserve, so that reclaim (which
    /// deletes in log order) can always make room.
    pub(super) fn shrinks_tail(&self, client: u64, start: u64, end: u64, version: u64) -> bool {
        let Some((seq, info)) = self.records.first() else {
            return false;
        };
        let h = info.header;
        if h.kind != RecordKind::Data || h.client != client {
            return false;
        }
        self.indexes.get(&client).is_some_and(|ix| {
            ix.lookup(h.offset_bytes, h.offset_bytes + h.length_bytes)
                .iter()
                .filter(|r| r.record == seq)
                .any(|r| r.start < end && start < r.end && r.version <= version)
        })
    }

    /// Whether a delete of versions ≤ `version` in `[start, end)` would remove nothing: the
    /// index holds no such version there and no record of the client not yet applied overlaps
    /// it. Such a delete needs no record (recovery replays the same records to the same index).
    pub(super) fn removes_nothing(&self, client: u64, start: u64, end: u64, version: u64) -> bool {
        let held = self
            .indexes
            .get(&client)
            .is_some_and(|ix| ix.lookup(start, end).iter().any(|r| r.version <= version));
        let pending = self.records.from(self.ack_cursor).any(|(_, r)| {
            let o = r.header;
            o.kind != RecordKind::Wrap
                && o.client == client
                && o.offset_bytes < end
                && start < o.offset_bytes + o.length_bytes
        });
        !held && !pending
    }

    /// Appends the record of a write or delete, or refuses it, or gives it back to wait for
    /// space (the tail pointer must move first).
    pub(super) fn append(&mut self, id: u64, request: Request) -> Option<(u64, Request)> {
        let (client, generation) = client_generation(&request);
        if generation < self.fence(client) {
            self.stats.fenced_refusals += 1;
            self.replies
                .push_back((id, Reply::Error(StoreError::Fenced)));
            return None;
        }
        let (kind, offset_bytes, length_bytes, payload_bytes) = match &request {
            Request::Write {
                offset_bytes, data, ..
            } => (
                RecordKind::Data,
                *offset_bytes,
                data.len() as u64,
                data.len() as u64,
            ),
            Request::Delete {
                offset_bytes,
                length_bytes,
                ..
            } => (RecordKind::Delete, *offset_bytes, *length_bytes, 0),
            _ => unreachable!("only writes and deletes append"),
        };
        let total = record_total_bytes(payload_bytes);
        let bad = length_bytes == 0
            || payload_bytes > PAYLOAD_BYTES_MAX as u64
            || offset_bytes.checked_add(length_bytes).is_none()
            || total + self.config.reserve_bytes > self.config.log_bytes;
        if bad {
            self.replies
                .push_back((id, Reply::Error(StoreError::BadRequest)));
            return None;
        }
        if let Request::Delete {
            client, version, ..
        } = &request
        {
            if self.removes_nothing(*client, offset_bytes, offset_bytes + length_bytes, *version) {
                self.stats.empty_deletes += 1;
                self.answer_done(id, *client);
                return None;
            }
        }
        let filler = if self.head + total > self.config.log_bytes {
            self.config.log_bytes - self.head
        } else {
            0
        };
        let need = total + filler;
        // Writes leave the reserve to deletes; deletes leave its last quarter to deletes that
        // free the tail record. Both leave cleaning the room to copy the tail forward.
        let reserve = match &request {
            Request::Write { .. } => self.config.reserve_bytes + self.clean_room().max(total),
            Request::Delete {
                client,
                offset_bytes,
                length_bytes,
                version,
                ..
            } => {
                if self.shrinks_tail(
                    *client,
                    *offset_bytes,
                    offset_bytes + length_bytes,
                    *version,
                ) {
                    0
                } else {
                    self.config.reserve_bytes / 4 / RECORD_ALIGN * RECORD_ALIGN + self.clean_room()
                }
            }
            _ => unreachable!("only writes and deletes append"),
        };
        if need + reserve > self.free_bytes() {
            let cleanable = self.cleanable_bytes();
            let space_will_come = need + reserve <= self.free_bytes() + self.passed_bytes()
                || self.superblock_in_flight.is_some()
                || (cleanable >= self.clean_threshold()
                    && need + reserve <= self.free_bytes() + cleanable);
            if space_will_come || kind == RecordKind::Delete {
                // Space comes back once the tail pointer is durable; deletes always wait rather
                // than fail, so reclaim always makes progress.
                return Some((id, request));
            }
            self.stats.full_refusals += 1;
            self.replies.push_back((id, Reply::Error(StoreError::Full)));
            return None;
        }
        if filler > 0 {
            self.push_record(RecordKind::Wrap, 0, 0, 0, 0, 0, Vec::new(), filler, None);
        }
        match request {
            Request::Write {
                client,
                volume,
                offset_bytes,
                version,
                data,
            } => {
                self.push_record(
                    kind,
                    client,
                    volume,
                    offset_bytes,
                    length_bytes,
                    version,
                    data,
                    total,
                    Some(id),
                );
            }
            Request::Delete {
                client,
                volume,
                offset_bytes,
                length_bytes,
                version,
                ..
            } => {
                self.push_record(
                    kind,
                    client,
                    volume,
                    offset_bytes,
                    length_bytes,
                    version,
                    Vec::new(),
                    total,
                    Some(id),
                );
            }
            _ => unreachable!("only writes and deletes append"),
        }
        None
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn push_record(
        &mut self,
        kind: RecordKind,
        client: u64,
        volume: u64,
        offset_bytes: u64,
        length_bytes: u64,
        version: u64,
        payload: Vec<u8>,
        total: u64,
        request: Option<u64>,
    ) {
        debug_assert!(self.head + total <= self.config.log_bytes);
        let header = RecordHeader {
            kind,
            seq: self.next_seq,
            client,
            volume,
            offset_bytes,
            length_bytes,
            version,
            payload_bytes: payload.len() as u32,
            total_bytes: total as u32,
            epoch: self.epoch,
            prev_epoch: self.last_epoch,
        };
        let (head, zeros) = header.encode_header(&payload);
        let bytes = WriteBytes::record(head, payload, zeros);
        let id = self.io_id();
        // A record written while nothing else is being written or waiting for a flush is made
        // durable by its own write step; under concurrency, flushes are shared instead.
        let durable = self.config.durable_lone_writes
            && self.io_records.is_empty()
            && self.written_unflushed.is_empty()
            && self.flush_in_flight.is_none();
        self.io_records.insert(id, (header.seq, durable));
        self.disk.push_back(DiskOp::Write {
            id,
            offset_bytes: LOG_OFFSET + self.head,
            data: bytes,
            durable,
        });
        self.records.push(
            header.seq,
            RecordInfo {
                position: self.head,
                total_bytes: total,
                header,
                state: RecordState::Writing,
                live_bytes: 0,
                request,
            },
        );
        if kind == RecordKind::Data {
            *self.data_sizes.entry(total).or_default() += 1;
        }
        self.stats.requests_in_flight += request.is_some() as u64;
        self.stats.records_written += 1;
        self.next_seq += 1;
        self.last_epoch = self.epoch;
        self.used_bytes += total;
        self.unapplied_bytes += total;
        self.head += total;
        if self.head == self.config.log_bytes {
            self.head = 0;
            self.epoch = self.random_epoch();
        }
    }
}

/// The client and generation of a write or delete.
fn client_generation(request: &Request) -> (u64, u64) {
    match request {
        Request::Write {
            client, version, ..
        } => (*client, generation_of(*version)),
        Request::Delete {
            client, generation, ..
        } => (*client, *generation),
        _ => unreachable!("only writes and deletes carry a generation"),
    }
}
