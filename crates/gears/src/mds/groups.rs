//! Chunk groups' primaries: assigned under a new epoch, told their view, released (§3.5's
//! migrations), and the log clients' superblocks they write through the MDS.

use super::*;

impl Mds {
    /// Gives group `g` (without a primary) a primary: `prefer` if it is up, else a replica up
    /// (not `exclude`, not being rebuilt) chosen at random; none if no replica is up (it gets
    /// one when one returns). A new epoch either way.
    pub(super) fn assign_primary(
        &mut self,
        g: u32,
        prefer: Option<ServerId>,
        exclude: Option<ServerId>,
    ) {
        let entry = &self.groups[g as usize];
        debug_assert!(entry.primary.is_none());
        let up = |x: ServerId| self.servers[x as usize].state == ServerState::Up;
        let candidates: Vec<ServerId> = entry
            .replicas
            .iter()
            .copied()
            .filter(|&x| up(x) && Some(x) != exclude && entry.rebuilding != Some(x))
            .collect();
        let chosen = match prefer {
            Some(p) if candidates.contains(&p) => Some(p),
            _ if candidates.is_empty() => None,
            _ => Some(candidates[self.rng.below(candidates.len() as u64) as usize]),
        };
        let entry = &mut self.groups[g as usize];
        entry.epoch += 1;
        entry.primary = chosen;
        entry.release_to = None;
        entry.assigned_at = self.now;
        if let Some(p) = chosen {
            let superblock = entry.superblock.clone();
            let view = self.view(GroupId(g));
            self.out.push_back((
                Endpoint::Server(p),
                Message::BecomePrimary { view, superblock },
            ));
        }
    }

    /// Tells group `g`'s primary its current view (availability or replicas changed).
    pub(super) fn tell_primary(&mut self, g: u32) {
        if let Some(p) = self.groups[g as usize].primary {
            let view = self.view(GroupId(g));
            self.out
                .push_back((Endpoint::Server(p), Message::GroupChanged { view }));
        }
    }

    pub(super) fn released(&mut self, s: ServerId, group: GroupId, epoch: Epoch) {
        let Some(entry) = self.groups.get_mut(group.0 as usize) else {
            return;
        };
        if entry.epoch != epoch || entry.primary != Some(s) {
            return;
        }
        let to = entry.release_to.take().flatten();
        entry.primary = None;
        self.stats.migrations += 1;
        self.assign_primary(group.0, to, Some(s));
    }

    /// A primary writes its log client's superblock: kept (trailing zeros trimmed) when `s` is
    /// the group's primary at `epoch`; refused otherwise (a deposed primary).
    pub(super) fn write_superblock(
        &mut self,
        s: ServerId,
        group: GroupId,
        epoch: Epoch,
        data: &[u8],
    ) -> bool {
        match self.groups.get_mut(group.0 as usize) {
            Some(g) if g.epoch == epoch && g.primary == Some(s) => {
                let len = data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                g.superblock = Some(data[..len].to_vec());
                true
            }
            _ => false,
        }
    }
}
