//! Recovery: reading the superblock and scanning the log from the durable tail to rebuild
//! the index.

use super::*;

impl Store {
    pub(super) fn superblock_read(&mut self, now: Nanos, data: Vec<u8>) {
        let Phase::Superblocks { pending, best } = &mut self.phase else {
            return;
        };
        *pending -= 1;
        if let Ok(sb) = Superblock::decode(&data) {
            if best.as_ref().is_none_or(|b| sb.generation > b.generation) {
                *best = Some(sb);
            }
        }
        if *pending > 0 {
            return;
        }
        let Some(sb) = best.take() else {
            // Never reformat implicitly: that would discard a damaged store's records.
            self.phase = Phase::Failed;
            return;
        };
        self.store_id = sb.store_id;
        self.fences = sb.fences.iter().copied().collect();
        self.durable = sb.clone();
        self.config.log_bytes = sb.log_bytes;
        self.phase = Phase::Scanning(Box::new(Scan {
            sb: sb.clone(),
            buffer_position: sb.tail,
            buffer: Vec::new(),
            cursor: 0,
            consumed: 0,
            expected_seq: sb.tail_seq,
            expected_prev_epoch: sb.tail_prev_epoch,
            expected_epoch: Some(sb.tail_epoch),
            reads: VecDeque::new(),
            next_read: sb.tail,
            requested: 0,
            spill: None,
            discard: 0,
            started: now,
        }));
        self.request_scan_reads();
        self.scan_next(now);
    }

    /// Keeps `scan_reads_ahead` reads of the log in flight, in order from the tail, wrapping
    /// at the end of the log, never more than one lap.
    pub(super) fn request_scan_reads(&mut self) {
        let Phase::Scanning(scan) = &mut self.phase else {
            return;
        };
        let log_bytes = self.config.log_bytes;
        while scan.reads.len() < self.config.scan_reads_ahead.max(1) && scan.requested < log_bytes {
            let length = self
                .config
                .scan_chunk_bytes
                .min(log_bytes - scan.next_read)
                .min(log_bytes - scan.requested);
            let id = self.next_io + 1;
            self.next_io = id;
            self.io_reads.insert(id, (u64::MAX - 1, 0));
            self.disk.push_back(DiskOp::Read {
                id,
                offset_bytes: LOG_OFFSET + scan.next_read,
                length_bytes: length,
            });
            scan.reads.push_back((id, None));
            scan.requested += length;
            scan.next_read = (scan.next_read + length) % log_bytes;
        }
    }

    pub(super) fn scan_read(&mut self, now: Nanos, id: u64, data: Vec<u8>) {
        let Phase::Scanning(scan) = &mut self.phase else {
            return;
        };
        if let Some(slot) = scan.reads.iter_mut().find(|(i, _)| *i == id) {
            slot.1 = Some(data);
        }
        if scan.reads.front().is_some_and(|(_, d)| d.is_some()) {
            self.scan_next(now);
            self.request_scan_reads();
        }
    }

    /// Parses records from the scan buffer; asks for more bytes or finishes.
    pub(super) fn scan_next(&mut self, now: Nanos) {
        loop {
            let log_bytes = self.config.log_bytes;
            let Phase::Scanning(scan) = &mut self.phase else {
                return;
            };
            if scan.consumed >= log_bytes {
                break;
            }
            // A record never crosses the end of the log.
            let room = log_bytes - scan.buffer_position;
            if room < HEADER_BYTES as u64 {
                break;
            }
            if !scan.make_available(HEADER_BYTES) {
                if scan.exhausted(log_bytes) {
                    break;
                }
                return; // until more of the log has been read
            }
            let at = scan.cursor;
            let Ok(h) = RecordHeader::decode(&scan.buffer[at..at + HEADER_BYTES]) else {
                break;
            };
            // The chain: consecutive sequence numbers, each record naming its predecessor's epoch.
            // A new epoch starts at every wrap and after every recovery, so bytes left past the
            // head by an earlier lap or an earlier life never chain on.
            let chained = h.seq == scan.expected_seq
                && h.prev_epoch == scan.expected_prev_epoch
                && scan.expected_epoch.is_none_or(|e| h.epoch == e)
                && if h.kind == RecordKind::Wrap {
                    scan.buffer_position + h.total_bytes as u64 == log_bytes
                } else {
                    scan.buffer_position + h.total_bytes as u64 <= log_bytes
                };
            if !chained {
                break;
            }
            let need = if h.kind == RecordKind::Wrap {
                RECORD_ALIGN as usize
            } else {
                h.total_bytes as usize
            };
            if !scan.make_available(need) {
                if scan.exhausted(log_bytes) {
                    break;
                }
                return;
            }
            let at = scan.cursor;
            let payload =
                &scan.buffer[at + HEADER_BYTES..at + HEADER_BYTES + h.payload_bytes as usize];
            if RecordHeader::verify(&scan.buffer[at..at + HEADER_BYTES], payload).is_err() {
                break;
            }
            // A valid record: keep it, durable.
            let position = scan.buffer_position;
            let total = h.total_bytes as u64;
            if h.kind == RecordKind::Wrap {
                scan.skip(total);
                scan.buffer_position = log_bytes;
            } else {
                scan.cursor += need;
                scan.buffer_position += total;
            }
            scan.consumed += total;
            scan.expected_seq = h.seq + 1;
            scan.expected_prev_epoch = h.epoch;
            scan.expected_epoch = None;
            if scan.buffer_position == log_bytes {
                // The buffer runs on from the start of the log.
                scan.buffer_position = 0;
            }
            self.stats.records_scanned += 1;
            self.stats.bytes_scanned += total;
            if h.kind == RecordKind::Data {
                *self.data_sizes.entry(total).or_default() += 1;
            }
            self.records.push(
                h.seq,
                RecordInfo {
                    position,
                    total_bytes: total,
                    header: h,
                    state: RecordState::Durable,
                    live_bytes: 0,
                    request: None,
                },
            );
        }
        self.finish_recovery(now);
    }

    pub(super) fn finish_recovery(&mut self, now: Nanos) {
        let Phase::Scanning(scan) = std::mem::replace(&mut self.phase, Phase::Ready) else {
            return;
        };
        let sb = scan.sb;
        self.next_seq = scan.expected_seq;
        self.ack_cursor = sb.tail_seq;
        self.head = scan.buffer_position % self.config.log_bytes;
        self.last_epoch = scan.expected_prev_epoch;
        // A new life starts a new epoch (see the scan's chain rule).
        self.epoch = self.random_epoch();
        self.used_bytes = scan.consumed;
        // Replay in log order; every record is durable.
        let headers: Vec<RecordHeader> = self.records.values().map(|r| r.header).collect();
        for h in headers {
            self.apply(h);
            self.ack_cursor = h.seq + 1;
        }
        // Every record found was applied (its bytes were never counted as unapplied).
        self.unapplied_bytes = 0;
        self.advance_tail();
        if scan.consumed == 0 {
            // No record at the tail: the superblock names the epoch of a record that never
            // became durable, and a new record at the tail (of this life's epoch) would not
            // chain on at the next recovery. Record this life's epoch first; records are
            // acknowledged only once it is durable.
            self.unrecorded_epoch = Some(self.epoch);
            let sb = Superblock {
                store_id: self.store_id,
                generation: self.durable.generation + 1,
                log_bytes: self.config.log_bytes,
                tail: self.head,
                tail_seq: self.next_seq,
                tail_epoch: self.epoch,
                tail_prev_epoch: self.last_epoch,
                fences: self.durable.fences.clone(),
            };
            self.write_superblock_now(sb);
        }
        self.stats.valid_data_bytes = self.records.values().map(|r| r.live_bytes).sum();
        self.stats.recovery_ns = now - scan.started;
        self.last_activity = now;
        self.clean();
    }
}
