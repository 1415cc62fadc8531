//! The superblock on the base volume: the store set and generation it records, written one
//! write at a time, and the "degraded" mark it carries while some visible data has fewer than
//! N copies.

use super::*;

impl Client {
    pub(super) fn superblock(&self) -> Superblock {
        Superblock {
            generation: self.generation,
            degraded: self.degraded,
            stores: self
                .stores
                .iter()
                .filter(|s| !s.removed)
                .map(|s| s.info)
                .collect(),
        }
    }

    /// The superblock changed: written now, or once the write in flight completes.
    pub(super) fn write_superblock(&mut self) {
        self.superblock_dirty = true;
        if self.superblock_in_flight.is_some() || self.superblock_retry_at.is_some() {
            return;
        }
        self.superblock_dirty = false;
        self.superblock_in_flight = Some(self.degraded);
        let id = self.id();
        self.base_pending.insert(id, BaseKind::Superblock);
        self.base_out.push_back(BaseOp::Write {
            id,
            offset_bytes: self.config.usable_bytes(),
            data: self.superblock().encode(),
            durable: true,
        });
    }

    pub(super) fn superblock_written(&mut self) {
        let degraded = self
            .superblock_in_flight
            .take()
            .expect("a superblock write in flight");
        self.degraded_durable = degraded;
        if self.degraded_is_durable() {
            // Deletes of copies that data with fewer than N copies may have waited for the
            // mark (see `short_copy_refusal`).
            for st in &mut self.stores {
                if !st.stale.is_empty() {
                    st.stale_dirty = true;
                }
            }
            for key in std::mem::take(&mut self.held_writes) {
                self.finish_write(key);
            }
            if matches!(self.phase, Phase::Marking) {
                self.become_ready();
            }
        }
        if std::mem::take(&mut self.superblock_dirty) {
            self.write_superblock();
        }
    }

    /// Reads the store set from the base volume (a restart's first step).
    pub(super) fn read_superblock(&mut self) {
        let id = self.id();
        self.base_pending.insert(id, BaseKind::Superblock);
        self.base_out.push_back(BaseOp::Read {
            id,
            offset_bytes: self.config.usable_bytes(),
            length_bytes: SUPERBLOCK_BYTES,
        });
    }

    /// The superblock's read or write failed on the base volume's device: tried again a probe
    /// interval later.
    pub(super) fn superblock_io_failed(&mut self) {
        if matches!(self.phase, Phase::ReadingSuperblock) {
            self.superblock_retry_at = Some(self.now + self.config.probe_interval_ns);
        } else {
            self.superblock_failed();
        }
    }

    /// The time to try the superblock's read or write again has come.
    pub(super) fn retry_superblock(&mut self) {
        self.superblock_retry_at = None;
        if matches!(self.phase, Phase::ReadingSuperblock) {
            self.read_superblock();
        } else {
            self.write_superblock();
        }
    }

    /// The base volume's device failed the superblock write: what it says on the base volume
    /// is unknown until a later write succeeds, which is tried after a probe interval. Nothing
    /// waiting for it (writes held for "degraded", a format, a recovery) goes on meanwhile.
    fn superblock_failed(&mut self) {
        let degraded = self
            .superblock_in_flight
            .take()
            .expect("a superblock write in flight");
        // A "clear" that failed may have landed: the mark is durable no more either way.
        if !degraded {
            self.degraded_durable = false;
        }
        self.superblock_dirty = true;
        self.superblock_retry_at = Some(self.now + self.config.probe_interval_ns);
    }

    /// The base volume says "degraded" whatever happens to writes in flight.
    pub(super) fn degraded_is_durable(&self) -> bool {
        self.degraded_durable && self.superblock_in_flight != Some(false)
    }

    /// Some acknowledged data may have fewer than N copies from now on.
    pub(super) fn set_degraded(&mut self) {
        if !self.degraded {
            self.degraded = true;
            self.write_superblock();
        }
    }

    /// Clears "degraded" once no range in the map has fewer than N copies (the ranges that
    /// had are reclaimed first; checked at most every probe interval: a scan of the map).
    pub(super) fn pump_degraded(&mut self) {
        if !self.degraded
            || !self.vulnerable.is_empty()
            || !self.held_writes.is_empty()
            || self.now < self.degraded_check_at
        {
            return;
        }
        self.degraded_check_at = self.now + self.config.probe_interval_ns;
        let n = self.config.n_way;
        if self
            .map
            .iter()
            .any(|(_, _, l)| !l.on_base && (l.stores.count_ones() as usize) < n)
        {
            return;
        }
        self.degraded = false;
        self.write_superblock();
    }
}
