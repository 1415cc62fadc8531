//! The event kernel: virtual time, a queue with deterministic tie-breaking, and a running hash
//! of every event so two runs of one seed can be compared exactly.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Virtual time in ns since the start of the run.
pub use cordillera_types::Nanos;

/// Events ordered by time, then by the order they were scheduled: two events at the same instant
/// always come out in the same order.
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<(Nanos, u64, Slot<E>)>>,
    next_seq: u64,
}

/// Wraps the payload so the heap never compares it.
struct Slot<E>(E);

impl<E> PartialEq for Slot<E> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<E> Eq for Slot<E> {}
impl<E> PartialOrd for Slot<E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Slot<E> {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> EventQueue<E> {
        EventQueue::default()
    }

    pub fn push(&mut self, time: Nanos, event: E) {
        self.heap.push(Reverse((time, self.next_seq, Slot(event))));
        self.next_seq += 1;
    }

    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.heap.pop().map(|Reverse((t, _, Slot(e)))| (t, e))
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
