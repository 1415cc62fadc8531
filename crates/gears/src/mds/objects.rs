//! Objects and their chunks: created (chunks drawn at random among the groups with room, §3.5),
//! looked up, deleted; and the size of the MDS's state (§4.5).

use super::*;

impl Mds {
    pub(super) fn create(
        &mut self,
        object: ObjectId,
        size_bytes: u64,
    ) -> Result<ObjectLayout, MdsError> {
        if self.objects.contains_key(&object) {
            return Err(MdsError::Exists);
        }
        let chunk_count = size_bytes.div_ceil(self.config.chunk_bytes);
        if chunk_count > self.config.chunks_per_object_max {
            return Err(MdsError::TooLarge);
        }
        let max = self.config.slots_per_group_max;
        let free: u64 = self
            .groups
            .iter()
            .map(|g| max.saturating_sub(g.next_slot) as u64)
            .sum();
        if chunk_count > free {
            return Err(MdsError::TooLarge);
        }
        let first_chunk = self.chunks.len() as u64;
        let n = self.groups.len();
        for _ in 0..chunk_count {
            // §3.5: "Chunks are assigned randomly to chunk groups on creation" (a full group
            // passes its chunk to the next with room).
            let drawn = self.rng.below(n as u64) as usize;
            let g = (0..n)
                .map(|i| (drawn + i) % n)
                .find(|&g| self.groups[g].next_slot < max)
                .expect("room was counted");
            let slot = self.groups[g].next_slot;
            debug_assert!(slot < max, "group {g} given a chunk past its slots");
            self.groups[g].next_slot = slot + 1;
            self.chunks.push((g as u32, slot));
        }
        self.persisted.object_changed(object);
        self.objects.insert(
            object,
            ObjectEntry {
                size_bytes,
                first_chunk,
                chunk_count,
            },
        );
        self.layout_of(object)
    }

    pub(super) fn layout_of(&self, object: ObjectId) -> Result<ObjectLayout, MdsError> {
        let o = self.objects.get(&object).ok_or(MdsError::NoSuchObject)?;
        let chunks: Vec<(GroupId, u32)> = (o.first_chunk..o.first_chunk + o.chunk_count)
            .map(|c| {
                let (g, slot) = self.chunks[c as usize];
                (GroupId(g), slot)
            })
            .collect();
        let groups: BTreeSet<GroupId> = chunks.iter().map(|&(g, _)| g).collect();
        Ok(ObjectLayout {
            object,
            size_bytes: o.size_bytes,
            chunk_bytes: self.config.chunk_bytes,
            chunks,
            groups: groups.into_iter().map(|g| self.view(g)).collect(),
        })
    }
    pub(super) fn delete(&mut self, object: ObjectId) -> Result<(), MdsError> {
        let o = self.objects.remove(&object).ok_or(MdsError::NoSuchObject)?;
        self.persisted.object_changed(object);
        for c in o.first_chunk..o.first_chunk + o.chunk_count {
            debug_assert_ne!(
                self.chunks[c as usize].0,
                u32::MAX,
                "chunk {c} of {object:?} freed twice"
            );
            self.chunks[c as usize] = (u32::MAX, 0);
            self.persisted.chunk_freed(c);
        }
        Ok(())
    }
}
