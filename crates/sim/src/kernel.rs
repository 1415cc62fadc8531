//! The event kernel: virtual time, a queue with deterministic tie-breaking, and a running hash
//! of every event so two runs of one seed can be compared exactly.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Virtual time in ns since the start of the run.
pub use cordillera_types::Nanos;

/// Events ordered by time, then by the order they were scheduled: two events at the same instant
/// always come out in the same order. The heap orders small keys (time, order, slot); the events
/// wait in slots, reused, so a push or a pop moves 24 bytes up and down the heap whatever an
/// event carries.
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<(Nanos, u64, u32)>>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> EventQueue<E> {
        EventQueue::default()
    }

    pub fn push(&mut self, time: Nanos, event: E) {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(event);
                slot
            }
            None => {
                self.slots.push(Some(event));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 events pending")
            }
        };
        self.heap.push(Reverse((time, self.next_seq, slot)));
        self.next_seq += 1;
    }

    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        let Reverse((t, _, slot)) = self.heap.pop()?;
        self.free.push(slot);
        let event = self.slots[slot as usize]
            .take()
            .expect("a queued event's slot holds it");
        Some((t, event))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// A running 64-bit hash of every event a run processes (one multiply-rotate step per word):
/// equal hashes ⇔ (with overwhelming probability) identical runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventHash(pub u64);

impl Default for EventHash {
    fn default() -> EventHash {
        EventHash(0xcbf2_9ce4_8422_2325)
    }
}

impl EventHash {
    pub fn add(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_break_by_schedule_order() {
        let mut q = EventQueue::new();
        q.push(5, "b");
        q.push(3, "a");
        q.push(5, "c");
        q.push(5, "d");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(3, "a"), (5, "b"), (5, "c"), (5, "d")]);
    }

    /// Pushes and pops interleaved (slots freed and reused) come out as a sort by time, then
    /// by push order, would give.
    #[test]
    fn interleaved_pushes_and_pops_keep_the_order() {
        let mut rng = crate::rng::SimRng::new(11, 0);
        let mut q = EventQueue::new();
        let mut model: Vec<(Nanos, u64)> = Vec::new();
        let (mut now, mut pushed) = (0, 0u64);
        for _ in 0..20_000 {
            if model.is_empty() || rng.chance(0.55) {
                let t = now + rng.below(50);
                q.push(t, pushed);
                model.push((t, pushed));
                pushed += 1;
            } else {
                let first = (0..model.len())
                    .min_by_key(|&i| model[i])
                    .expect("not empty");
                let (t, e) = model.remove(first);
                assert_eq!(q.pop(), Some((t, e)));
                now = t;
            }
            assert_eq!(q.len(), model.len());
        }
    }

    #[test]
    fn hash_sees_order() {
        let (mut a, mut b) = (EventHash::default(), EventHash::default());
        a.add(1);
        a.add(2);
        b.add(2);
        b.add(1);
        assert_ne!(a, b);
    }
}
