//! The warm-up log as the cache writes it: entries staged and written in chunks, syncs, log
//! writes held while an overlapping one is in flight (safeguard 5), a log that fails, and the
//! clean close (the volume flushed, every entry written and synced, then the clean superblock).

use super::*;

impl WarmCache {
    pub(super) fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(super) fn log_write(&mut self, offset_bytes: u64, data: Vec<u8>) {
        let id = self.id();
        self.issue_log(CacheIo::LogWrite {
            id,
            offset_bytes,
            data,
        });
    }

    pub(super) fn log_sync(&mut self) -> u64 {
        let id = self.id();
        self.issue_log(CacheIo::LogSync { id });
        id
    }

    /// Issues a log command, or holds it (and every one after it) while it would overlap a
    /// log write in flight (safeguard 5).
    pub(super) fn issue_log(&mut self, io: CacheIo) {
        if !self.log_held.is_empty() || self.overlaps_log_writing(&io) {
            self.log_held.push_back(io);
            return;
        }
        self.send_log(io);
    }

    /// Hands a log command to the driver; a write is in flight until answered.
    pub(super) fn send_log(&mut self, io: CacheIo) {
        if let CacheIo::LogWrite {
            id,
            offset_bytes,
            data,
        } = &io
        {
            self.log_writing
                .push((*id, *offset_bytes, offset_bytes + data.len() as u64));
        }
        self.out.push_back(io);
    }

    pub(super) fn overlaps_log_writing(&self, io: &CacheIo) -> bool {
        let CacheIo::LogWrite {
            offset_bytes, data, ..
        } = io
        else {
            return false;
        };
        let (lo, hi) = (*offset_bytes, offset_bytes + data.len() as u64);
        self.options.safeguards.ordered_log_writes
            && self.log_writing.iter().any(|&(_, l, h)| l < hi && lo < h)
    }

    /// A log command answered: the ones held behind it go as far as they can.
    pub(super) fn log_answered(&mut self, id: u64) {
        self.log_writing.retain(|&(w, _, _)| w != id);
        while let Some(io) = self.log_held.front() {
            if self.overlaps_log_writing(io) {
                break;
            }
            let io = self.log_held.pop_front().expect("a held command");
            self.send_log(io);
        }
    }

    pub(super) fn record(&mut self, entry: Entry, data: Option<&[u8]>) {
        debug_assert!(entry.blocks > 0, "an entry of no block");
        debug_assert!(
            data.is_none_or(|d| d.len() as u64 == u64::from(entry.blocks) * BLOCK),
            "an entry's data is not its blocks"
        );
        let Some(log) = self.log.as_mut() else {
            return;
        };
        let Some(m) = log.monitor.as_mut() else {
            return;
        };
        if let Some(chunk) = m.record(entry, data) {
            // A failed log is not written to; the staging buffer keeps being emptied.
            if log.failed.is_none() {
                log.chunks += 1;
                log.bytes += chunk.bytes.len() as u64;
                self.log_write(chunk.offset, chunk.bytes);
            }
        }
    }

    pub(super) fn handle_log_done_step(&mut self, now: u64, id: u64, result: Result<(), String>) {
        self.log_answered(id);
        if let Err(e) = &result {
            if let Some(log) = self.log.as_mut() {
                log.failed.get_or_insert_with(|| e.clone());
            }
        }
        match (self.phase.clone(), result) {
            (Phase::Starting { .. }, Err(e)) => {
                // The log cannot be marked not clean: it is not used at all.
                tracing::warn!(error = %e, "the warm-up log cannot be written; the cache warms on demand");
                self.log = None;
                self.out.clear();
                self.log_writing.clear();
                self.log_held.clear();
                self.preload
                    .fall_back(now, format!("the warm-up log cannot be written: {e}"));
                self.phase = Phase::Running;
            }
            (Phase::Starting { id: sync }, Ok(())) if sync == id => self.phase = Phase::Running,
            (
                Phase::Closing {
                    id: Some(sync),
                    superblock,
                },
                _,
            ) if sync == id => {
                // Any log write that failed before this sync (its answer came first) means the
                // log is not whole: it must not be called clean.
                if let Some(e) = self.log.as_ref().and_then(|l| l.failed.clone()) {
                    self.phase = Phase::Closed(Err(format!("closing the warm-up log: {e}")));
                } else if superblock {
                    if let Some(log) = self.log.as_mut() {
                        log.monitor = None;
                    }
                    self.phase = Phase::Closed(Ok(()));
                } else {
                    self.write_clean_superblock();
                }
            }
            _ => {}
        }
        // Coherence 2: the log is called clean only when every write to it succeeded.
        debug_assert!(
            !matches!(self.phase, Phase::Closed(Ok(())))
                || self.log.as_ref().is_none_or(|l| l.failed.is_none()),
            "the log closed clean after a failed write"
        );
    }

    pub(super) fn write_clean_superblock(&mut self) {
        let Some(log) = self.log.as_ref() else {
            return;
        };
        let clean = Superblock {
            clean: true,
            ..log.superblock
        };
        self.log_write(0, clean.encode());
        let id = self.log_sync();
        self.phase = Phase::Closing {
            id: Some(id),
            superblock: true,
        };
    }

    pub(super) fn fail_log_step(&mut self, now: u64, why: String) {
        match self.phase {
            Phase::Starting { id } | Phase::Closing { id: Some(id), .. } => {
                self.handle_log_done(now, id, Err(why))
            }
            _ => {
                if let Some(log) = self.log.as_mut() {
                    log.failed.get_or_insert(why);
                }
            }
        }
    }

    pub(super) fn handle_close_step(&mut self, _now: u64) {
        if !matches!(self.phase, Phase::Running) {
            return;
        }
        let has_monitor = self.log.as_ref().is_some_and(|l| l.monitor.is_some());
        if !has_monitor {
            self.phase = Phase::Closed(Ok(()));
            return;
        }
        if let Some(e) = self.log.as_ref().and_then(|l| l.failed.clone()) {
            self.phase = Phase::Closed(Err(format!("the warm-up log failed earlier: {e}")));
            return;
        }
        self.out.push_back(CacheIo::VolumeFlush);
        self.phase = Phase::Closing {
            id: None,
            superblock: false,
        };
    }

    pub(super) fn handle_volume_flushed_step(&mut self, _now: u64, result: Result<(), String>) {
        if self.phase
            != (Phase::Closing {
                id: None,
                superblock: false,
            })
        {
            return;
        }
        if let Err(e) = result {
            self.phase = Phase::Closed(Err(format!("flushing the volume: {e}")));
            return;
        }
        let chunk = self
            .log
            .as_mut()
            .and_then(|l| l.monitor.as_mut())
            .and_then(|m| m.flush());
        if let Some(chunk) = chunk {
            if let Some(log) = self.log.as_mut() {
                log.chunks += 1;
                log.bytes += chunk.bytes.len() as u64;
            }
            self.log_write(chunk.offset, chunk.bytes);
        }
        let id = self.log_sync();
        self.phase = Phase::Closing {
            id: Some(id),
            superblock: false,
        };
    }
}
