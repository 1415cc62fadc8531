//! Liveness of deletes: once requests stop, a stale copy on a store that is up is deleted
//! within a bounded time — also while another store is down, since the deletion records
//! written for the down store's stale copies stand for their deletes (Everest §3.3, invariant
//! 3). Without them a current copy on the live stores could not be deleted while an older one
//! waits on the down store, and the stores would fill with reclaimed data.

use super::*;

/// Requests stop at `ACTIVE_NS`; writes and reclaims in flight then are over by this much later.
const SETTLE_NS: Nanos = 300_000_000;
/// A client life counts once ready this long, a store once up this long (its failure or return
/// detected by the client's probes and timeouts).
const READY_NS: Nanos = 500_000_000;
const UP_NS: Nanos = 1_000_000_000;
/// Deletes held back continuously for longer than this fail the schedule. Deletes wait for
/// writes in flight (invariants 1 and 3), and a store's writes may wait on its disk up to
/// `SPTF_MAX_WAIT_NS` (4 s) behind reads near the head, so the bound is above that.
const HELD_MAX_NS: Nanos = 6_000_000_000;
/// How often the watcher looks.
pub const EVERY_NS: Nanos = 10_000_000;

#[derive(Default)]
pub struct HeldDeletes {
    up_since: [Option<Nanos>; NODES],
    ready_since: [Option<Nanos>; CLIENTS],
    /// Per client: since when a store that is up has had unsent deletes owed to it.
    held_since: [Option<Nanos>; CLIENTS],
    /// Looks at a ready client after requests stopped (a schedule with none checked nothing).
    pub checked: u64,
}

impl HeldDeletes {
    pub fn observe(&mut self, world: &World<Node>, t: Nanos) -> Result<(), String> {
        for n in 0..NODES {
            let up = world.core(n).is_some();
            match (up, self.up_since[n]) {
                (true, None) => self.up_since[n] = Some(t),
                (false, Some(_)) => self.up_since[n] = None,
                _ => {}
            }
        }
        for i in 0..CLIENTS {
            let client = world
                .core(i)
                .and_then(|node| node.client.as_ref())
                .map(|c| (&c.client, &c.store_nodes));
            let ready = client.is_some_and(|(c, _)| c.is_ready());
            match (ready, self.ready_since[i]) {
                (true, None) => self.ready_since[i] = Some(t),
                (false, Some(_)) => self.ready_since[i] = None,
                _ => {}
            }
            let settled = |since: Option<Nanos>, d: Nanos| since.is_some_and(|s| t >= s + d);
            let Some((c, store_nodes)) = client else {
                self.held_since[i] = None;
                continue;
            };
            if t < ACTIVE_NS + SETTLE_NS || !settled(self.ready_since[i], READY_NS) {
                self.held_since[i] = None;
                continue;
            }
            let figures = c.store_figures();
            if figures.iter().filter(|f| f.up && !f.removed).count() < c.config().n_way {
                // Fewer than N stores: writes that must stay off-loaded wait for a store (or
                // their copies' timeout), and so do the deletes their copies hold back.
                self.held_since[i] = None;
                continue;
            }
            self.checked += 1;
            let held: Vec<(NodeId, u64)> = figures
                .iter()
                .zip(store_nodes)
                .filter(|(f, &n)| f.up && !f.removed && settled(self.up_since[n], UP_NS))
                .filter(|(f, _)| f.unsent_delete_bytes > 0)
                .map(|(f, &n)| (n, f.unsent_delete_bytes))
                .collect();
            if held.is_empty() {
                self.held_since[i] = None;
                continue;
            }
            let since = *self.held_since[i].get_or_insert(t);
            if t >= since + HELD_MAX_NS {
                let down: Vec<NodeId> =
                    (0..NODES).filter(|&n| self.up_since[n].is_none()).collect();
                let stores: Vec<String> = store_nodes
                    .iter()
                    .filter_map(|&n| world.core(n))
                    .map(|node| format!("node {}: {}", node.id, node.store.store.describe()))
                    .collect();
                return Err(format!(
                    "at {t} ns, client {i} has held back deletes owed to stores that are up since {since} ns (node, bytes): {held:?}; nodes down: {down:?}; map {:?}; client: {}; stores: {}",
                    c.ranges().take(4).collect::<Vec<_>>(),
                    c.describe(),
                    stores.join("; ")
                ));
            }
        }
        Ok(())
    }
}
