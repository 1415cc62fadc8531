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
        if self.superblock_in_flight.is_some() {
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
            for key in std::mem::take(&mut self.held_writes) {
                self.finish_write(key);
            }
        }
        if std::mem::take(&mut self.superblock_dirty) {
            self.write_superblock();
        }
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
