//! Upward reads: split by the range map between the base volume and the stores, or waiting
//! for a failed write over them to settle.

use super::*;

/// Pieces of a read bound for one place (the base, or one store) are fetched by one request
/// when no more than this lies between neighbours: reading the bytes between costs less than
/// another request (a 15K-RPM disk moves 128 KiB in about 1 ms, a seek takes 3–4).
pub(super) const READ_GAP_BYTES: u64 = 128 << 10;

/// A base read may extend to an end of a read's range when the bytes it adds are at most
/// this fraction (1/`EDGE_PARTS`) of the range (see [`Client::read_piece`]).
const EDGE_PARTS: u64 = 16;

impl Client {
    pub(super) fn start_read(&mut self, up_id: u64, offset_bytes: u64, length_bytes: u64) {
        let key = self.id();
        self.reads.insert(
            key,
            ReadOp {
                up_id,
                start: offset_bytes,
                len: length_bytes,
                buf: Vec::new(),
                whole_base: false,
                early: Vec::new(),
                outstanding: 0,
                error: None,
            },
        );
        if self.failed_write_unsettled(offset_bytes, offset_bytes + length_bytes) {
            self.reads_behind_failed_writes.push(key);
        } else {
            self.read_piece(key, offset_bytes, offset_bytes + length_bytes);
        }
    }

    /// Whether an off-loaded write answered with an error may still enter the range map over
    /// `[start, end)`: its copies held until the superblock says "degraded", or stores still
    /// owing its answers. A read now waits for it: served from the map, it would return the
    /// data beneath, and the write's copies would show to the reads after it (a failed write
    /// may take effect, but not after a read that began after its failure missed it).
    pub(super) fn failed_write_unsettled(&self, start: u64, end: u64) -> bool {
        self.writes
            .values()
            .any(|op| op.answered && op.start < end && start < op.start + op.data.len() as u64)
    }

    /// Starts the reads that waited for failed writes over them (see
    /// [`Client::failed_write_unsettled`]) once those have entered the map or ended.
    pub(super) fn pump_reads_behind_failed_writes(&mut self) {
        if self.reads_behind_failed_writes.is_empty() {
            return;
        }
        for key in std::mem::take(&mut self.reads_behind_failed_writes) {
            let (start, len) = {
                let op = &self.reads[&key];
                (op.start, op.len)
            };
            if self.failed_write_unsettled(start, start + len) {
                self.reads_behind_failed_writes.push(key);
            } else {
                self.read_piece(key, start, start + len);
            }
        }
    }

    /// Resolves `[start, end)` of a read by the range map: base pieces (with those the local
    /// replica holds, §3.6), store pieces (least loaded replica), parked pieces (no replica
    /// available). Pieces bound for one place are fetched by one request per run of them with
    /// no more than [`READ_GAP_BYTES`] between neighbours: a base read spans the run and keeps
    /// its pieces' bytes; a store read spans its run and names the pieces and versions wanted
    /// (what it answers between them is not used).
    pub(super) fn read_piece(&mut self, read: u64, start: u64, end: u64) {
        let mut base: Vec<(u64, u64)> = Vec::new();
        let mut by_store: Vec<(StoreIdx, Vec<Span>)> = Vec::new();
        let mut requests = 0u32;
        for (lo, hi, loc) in self.map_pieces(start, end) {
            match loc {
                None | Some(Loc { on_base: true, .. }) | Some(Loc { local: true, .. }) => {
                    if loc.is_some_and(|l| l.local && !l.on_base) {
                        self.stats.local_reads += 1;
                    }
                    base.push((lo, hi));
                }
                Some(l) => {
                    let replica = indices(l.stores)
                        .filter(|&s| self.stores[s].up && !self.stores[s].removed)
                        .min_by_key(|&s| self.store_preference(s));
                    // A newer copy sent there may still land over this one: wait for the
                    // barrier after which it cannot (`StoreState::unsealed`).
                    let unsealed = replica.is_some_and(|s| {
                        self.stores[s]
                            .unsealed
                            .iter()
                            .any(|&(a, b)| a < hi && lo < b)
                    });
                    match replica {
                        Some(s) if !unsealed => match by_store.iter_mut().find(|(t, _)| *t == s) {
                            Some((_, spans)) => spans.push((lo, hi, l.version)),
                            None => by_store.push((s, vec![(lo, hi, l.version)])),
                        },
                        _ => {
                            self.parked_reads.push((read, lo, hi));
                            requests += 1;
                        }
                    }
                }
            }
        }
        // A base run that reaches nearly to an end of the range is read to that end: a base
        // read of the whole range becomes the read's buffer as it is, where one short of it
        // would be copied into a zeroed buffer (a copy of the whole read for a few KiB less
        // to read). At most a sixteenth of the range more at each end.
        let edge = (end - start) / EDGE_PARTS;
        let runs = base.chunk_by(|a, b| b.0 - a.1 <= READ_GAP_BYTES).count();
        for (i, run) in base
            .chunk_by(|a, b| b.0 - a.1 <= READ_GAP_BYTES)
            .enumerate()
        {
            let (mut lo, mut hi) = (run[0].0, run[run.len() - 1].1);
            if i == 0 && lo - start <= edge {
                lo = start;
            }
            if i + 1 == runs && end - hi <= edge {
                hi = end;
            }
            let op = self.reads.get_mut(&read).expect("read");
            if lo == op.start && hi == op.start + op.len {
                op.whole_base = true;
            }
            let id = self.id();
            self.base_pending.insert(
                id,
                BaseKind::UpRead {
                    read,
                    start: lo,
                    // A run of one piece, not extended, keeps it all (no list to allocate).
                    keep: if run.len() > 1 || (lo, hi) != (run[0].0, run[0].1) {
                        run.to_vec()
                    } else {
                        Vec::new()
                    },
                },
            );
            self.base_in_flight += 1;
            self.stats.base_reads += 1;
            self.base_out.push_back(BaseOp::Read {
                id,
                offset_bytes: lo,
                length_bytes: hi - lo,
            });
            requests += 1;
        }
        for (s, spans) in by_store {
            for run in spans.chunk_by(|a, b| b.0 - a.1 <= READ_GAP_BYTES) {
                let (lo, hi) = (run[0].0, run[run.len() - 1].1);
                self.stats.store_reads += 1;
                let request = Request::Read {
                    client: self.config.client,
                    offset_bytes: lo,
                    length_bytes: hi - lo,
                };
                let pending = Pending::Read {
                    read,
                    spans: run.to_vec(),
                };
                self.send(s, request, pending);
                requests += 1;
            }
        }
        self.reads.get_mut(&read).expect("read").outstanding += requests;
    }

    /// A base read for a read arrived: `data` holds `[start, start + data.len())`, of which the
    /// `keep` spans are the read's (the rest are pieces read elsewhere; no spans: all of it).
    pub(super) fn base_read_done(
        &mut self,
        read: u64,
        start: u64,
        mut data: Vec<u8>,
        keep: &[(u64, u64)],
    ) {
        let op = self.reads.get_mut(&read).expect("read");
        let whole = start == op.start && data.len() as u64 == op.len;
        if whole {
            op.whole_base = false;
        }
        if keep.is_empty() || (whole && op.buf.is_empty()) {
            // One piece, or the whole read before any other piece came in: the buffer as it
            // is. Bytes of pieces read elsewhere are overwritten when they arrive.
            let len = data.len();
            self.read_piece_done(read, start, &mut data, 0, len);
            return;
        }
        for &(lo, hi) in keep {
            let skip = (lo - start) as usize;
            self.read_piece_done(read, lo, &mut data, skip, (hi - lo) as usize);
        }
    }

    /// Bytes of a read arrived, `data[skip..skip + len]` for `[start, start + len)`: `data`
    /// becomes the read's buffer when it is exactly the whole read and nothing else is in yet
    /// (taken, no copy), else the bytes are copied into the buffer at their place (a larger
    /// `data` is not kept alive).
    pub(super) fn read_piece_done(
        &mut self,
        read: u64,
        start: u64,
        data: &mut Vec<u8>,
        skip: usize,
        len: usize,
    ) {
        let op = self.reads.get_mut(&read).expect("read");
        debug_assert!(
            start >= op.start
                && start + len as u64 <= op.start + op.len
                && skip + len <= data.len(),
            "a piece [{start}, +{len}) outside read [{}, +{}) or its data",
            op.start,
            op.len
        );
        debug_assert!(op.outstanding > 0, "a piece of a read with none owed");
        if op.buf.is_empty()
            && start == op.start
            && skip == 0
            && len as u64 == op.len
            && data.len() == len
        {
            op.buf = std::mem::take(data);
            op.place_early();
            return;
        }
        if op.buf.is_empty() && op.whole_base {
            op.early.push((start, data[skip..skip + len].to_vec()));
            return;
        }
        if op.buf.is_empty() {
            op.buf = vec![0; op.len as usize];
            op.place_early();
        }
        let at = (start - op.start) as usize;
        op.buf[at..at + len].copy_from_slice(&data[skip..skip + len]);
    }

    pub(super) fn read_piece_finished(&mut self, read: u64) {
        let op = self.reads.get_mut(&read).expect("read");
        op.outstanding -= 1;
        if op.outstanding == 0 {
            let mut op = self.reads.remove(&read).expect("read");
            if let Some(e) = op.error {
                self.upward_out.push_back((op.up_id, UpReply::Error(e)));
                return;
            }
            debug_assert_eq!(
                op.buf.len() as u64,
                op.len,
                "every byte of a read is a piece's"
            );
            op.buf.resize(op.len as usize, 0);
            op.place_early();
            self.upward_out.push_back((op.up_id, UpReply::Read(op.buf)));
        }
    }
}

impl ReadOp {
    /// Copies the pieces that arrived before the buffer existed into it (they are newer than
    /// the bytes of the base read the buffer came from).
    fn place_early(&mut self) {
        for (start, data) in std::mem::take(&mut self.early) {
            let at = (start - self.start) as usize;
            self.buf[at..at + data.len()].copy_from_slice(&data);
        }
    }
}
