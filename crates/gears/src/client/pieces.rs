//! A request's pieces at the groups' primaries: each attempt sent under the group's view
//! (its own id, the view's epoch, the piece's first attempt), the answers matched to their
//! attempts, a write's piece done only once no attempt of it may still land, refusals and
//! silences sent again after a growing delay.

use super::*;

impl ObjectClient {
    /// Cuts a read or write at chunk boundaries and sends its pieces (a write once no earlier
    /// one over its bytes is unfinished).
    pub(super) fn split(&mut self, op: u64) {
        if self.held_back(op) {
            return;
        }
        let object = self.ops[&op].object;
        let layout = &self.layouts[&object];
        let chunk = layout.chunk_bytes;
        let size = layout.size_bytes;
        let o = self.ops.get_mut(&op).expect("op");
        let (offset, len) = match &o.kind {
            Kind::Read {
                offset_bytes,
                length_bytes,
            } => (*offset_bytes, *length_bytes),
            Kind::Write { offset_bytes, data } => (*offset_bytes, data.len() as u64),
            _ => unreachable!("only reads and writes are split"),
        };
        if len == 0 || offset.checked_add(len).is_none_or(|end| end > size) {
            self.finish(op, Err(ClientError::OutOfRange));
            return;
        }
        o.started = true;
        let mut at = offset;
        while at < offset + len {
            let index = at / chunk;
            let within = at % chunk;
            let piece_len = (chunk - within).min(offset + len - at);
            let (group, slot) = layout.chunks[index as usize];
            o.pieces.push(Piece {
                group,
                offset_bytes: slot as u64 * chunk + within,
                length_bytes: piece_len,
                at: (at - offset) as usize,
                attempts: 0,
                state: PieceState::Waiting { until: 0 },
                first: None,
                unanswered: BTreeMap::new(),
                succeeded: None,
            });
            at += piece_len;
        }
        o.remaining = o.pieces.len();
        if matches!(o.kind, Kind::Read { .. }) {
            o.buf = vec![0; len as usize];
        }
        for i in 0..o.pieces.len() {
            self.send_piece(op, i);
        }
    }

    pub(super) fn send_piece(&mut self, op: u64, i: usize) {
        let now = self.now;
        let group = self.ops[&op].pieces[i].group;
        let view = self
            .views
            .get(&group)
            .and_then(|v| Some((v.primary?, v.epoch)));
        let Some((primary, epoch)) = view else {
            // Ask the MDS who serves the group; the piece is sent when it answers.
            self.ops.get_mut(&op).expect("op").pieces[i].state = PieceState::Waiting {
                until: now + self.config.request_timeout_ns,
            };
            self.lookup_group(group);
            return;
        };
        self.stats.pieces += 1;
        // Every attempt its own id: its answer is told from the others'.
        let id = self.id_next();
        let o = self.ops.get_mut(&op).expect("op");
        let p = &mut o.pieces[i];
        p.unanswered.insert(id, epoch);
        let piece = *p.first.get_or_insert(id);
        p.state = PieceState::Sent {
            id,
            deadline: now + self.config.request_timeout_ns,
            to: primary,
        };
        let message = match &o.kind {
            Kind::Read { .. } => Message::Read {
                id,
                piece,
                group,
                offset_bytes: p.offset_bytes,
                length_bytes: p.length_bytes,
            },
            Kind::Write { data, .. } => Message::Write {
                id,
                piece,
                group,
                epoch,
                offset_bytes: p.offset_bytes,
                data: data[p.at..p.at + p.length_bytes as usize].to_vec(),
            },
            _ => unreachable!("only reads and writes have pieces"),
        };
        self.sent.insert(id, (op, i));
        self.out.push_back((Endpoint::Server(primary), message));
    }

    pub(super) fn lookup_group(&mut self, group: GroupId) {
        if self.group_lookups.contains_key(&group) {
            return;
        }
        let m = self.id_next();
        self.stats.lookups += 1;
        self.group_lookups.insert(group, m);
        self.ask_mds(
            MdsWait::Group { group },
            Message::LookupGroup { id: m, group },
            m,
        );
    }

    /// The MDS answered for `group`: pieces waiting for it go now.
    pub(super) fn wake_group(&mut self, group: GroupId) {
        let now = self.now;
        let mut ready = Vec::new();
        for (&op, o) in &self.ops {
            for (i, p) in o.pieces.iter().enumerate() {
                if p.group == group
                    && matches!(p.state, PieceState::Waiting { until } if until > now)
                {
                    ready.push((op, i));
                }
            }
        }
        // A group still without a primary is asked for again after the usual delay.
        if self.views.get(&group).is_some_and(|v| v.primary.is_some()) {
            for (op, i) in ready {
                self.send_piece(op, i);
            }
        }
    }

    /// An attempt was answered. Only the latest attempt's refusal sends the piece again; any
    /// answer may settle a write (an older attempt refused leaves none that may land later).
    pub(super) fn piece_answer(
        &mut self,
        from: Endpoint,
        id: u64,
        result: Result<Option<Vec<u8>>, ServeError>,
    ) {
        let _ = from;
        let Some((op, i)) = self.sent.remove(&id) else {
            return;
        };
        let Some(o) = self.ops.get_mut(&op) else {
            return;
        };
        let is_read = matches!(o.kind, Kind::Read { .. });
        let p = &mut o.pieces[i];
        let group = p.group;
        let epoch = p.unanswered.remove(&id);
        if p.state == PieceState::Done {
            return;
        }
        let latest = matches!(p.state, PieceState::Sent { id: last, .. } if last == id);
        match result {
            Ok(Some(data)) if is_read => {
                if data.len() as u64 != p.length_bytes {
                    // A malformed answer: as good as none.
                    if latest {
                        self.retry(op, i, group);
                    }
                    return;
                }
                o.buf[p.at..p.at + data.len()].copy_from_slice(&data);
                self.piece_done(op, i);
            }
            Ok(_) => {
                if let Some(epoch) = epoch {
                    p.succeeded = p.succeeded.max(Some((epoch, id)));
                }
                if p.settled() {
                    self.piece_done(op, i);
                } else if latest {
                    // An older attempt under a newer view is unanswered: try again under the
                    // newest view, whose success settles it.
                    self.retry(op, i, group);
                }
            }
            Err(ServeError::BadRequest) if latest => self.fail(op, i, ClientError::BadRequest),
            Err(ServeError::NoSpace) if latest => self.fail(op, i, ClientError::NoSpace),
            Err(_) => {
                if p.settled() {
                    self.piece_done(op, i);
                } else if latest {
                    self.retry(op, i, group);
                }
            }
        }
    }

    /// Piece `i` of `op` is done; the request with it, if it was the last.
    fn piece_done(&mut self, op: u64, i: usize) {
        let o = self.ops.get_mut(&op).expect("op");
        o.pieces[i].state = PieceState::Done;
        o.remaining -= 1;
        if o.remaining == 0 {
            let done = match (&o.kind, o.error) {
                (_, Some(error)) => Err(error),
                (Kind::Read { .. }, None) => Ok(Done::Read(std::mem::take(&mut o.buf))),
                (_, None) => Ok(Done::Written),
            };
            self.finish(op, done);
        }
    }

    /// Request `op` fails with `error` (piece `failed` ends here): a read at once; a
    /// write once its pieces sent and not done have settled — each may have reached some
    /// replicas, and must not land after the error is answered. Its pieces never sent are
    /// dropped. The first error is the one answered.
    fn fail(&mut self, op: u64, failed: usize, error: ClientError) {
        let Some(o) = self.ops.get_mut(&op) else {
            return;
        };
        o.error.get_or_insert(error);
        let is_write = matches!(o.kind, Kind::Write { .. });
        for (i, p) in o.pieces.iter_mut().enumerate() {
            if p.state == PieceState::Done || (is_write && p.first.is_some() && failed != i) {
                continue;
            }
            p.state = PieceState::Done;
            o.remaining -= 1;
        }
        if o.remaining == 0 {
            let error = o.error.expect("set above");
            self.finish(op, Err(error));
        }
    }

    /// The piece was refused or not answered: forget the group's primary and, after a delay,
    /// ask the MDS again and send it — or give up after `retries_max` retries (a read; a
    /// write's piece sent may have landed on some replicas, and is retried until it succeeds).
    pub(super) fn retry(&mut self, op: u64, i: usize, group: GroupId) {
        let now = self.now;
        let Some(o) = self.ops.get_mut(&op) else {
            return;
        };
        let is_write = matches!(o.kind, Kind::Write { .. });
        // The attempt stays registered: its answer may still come, and settle a write.
        let p = &mut o.pieces[i];
        p.attempts += 1;
        if p.attempts > self.config.retries_max && !(is_write && p.first.is_some()) {
            let attempts = p.attempts;
            self.fail(
                op,
                i,
                ClientError::Unavailable {
                    group: group.0,
                    attempts,
                },
            );
            return;
        }
        self.stats.retries += 1;
        let delay =
            (self.config.retry_delay_ns << (p.attempts - 1).min(16)).min(RETRY_DELAY_MAX_NS);
        // After the delay the piece finds no primary cached and asks the MDS (§3.1: "after a
        // timeout period the client fetches and caches the new chunk metadata").
        p.state = PieceState::Waiting { until: now + delay };
        self.views.remove(&group);
    }
}
