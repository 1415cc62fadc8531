//! The records kept in the log, by sequence number.
//!
//! Sequence numbers are consecutive from the in-memory tail to the head; records are added at
//! the head and leave at the tail. So they are a deque indexed from the oldest's number, not a
//! search tree: a lookup is a subtraction, a walk reads memory in order.

use std::collections::VecDeque;

#[derive(Debug)]
pub(super) struct Records<T> {
    /// The sequence number of `items[0]` (or of the next record added, when empty).
    first: u64,
    items: VecDeque<T>,
}

impl<T> Default for Records<T> {
    fn default() -> Self {
        Records {
            first: 0,
            items: VecDeque::new(),
        }
    }
}

impl<T> Records<T> {
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    fn index(&self, seq: u64) -> Option<usize> {
        let i = usize::try_from(seq.checked_sub(self.first)?).ok()?;
        (i < self.items.len()).then_some(i)
    }

    pub(super) fn get(&self, seq: u64) -> Option<&T> {
        self.index(seq).map(|i| &self.items[i])
    }

    pub(super) fn get_mut(&mut self, seq: u64) -> Option<&mut T> {
        self.index(seq).map(|i| &mut self.items[i])
    }

    /// The oldest record kept.
    pub(super) fn first(&self) -> Option<(u64, &T)> {
        self.items.front().map(|r| (self.first, r))
    }

    /// Adds the record `seq` at the head: the number after the newest kept, or any number when
    /// none is kept.
    ///
    /// # Panics
    ///
    /// When `seq` does not follow the newest record kept.
    pub(super) fn push(&mut self, seq: u64, record: T) {
        if self.items.is_empty() {
            self.first = seq;
        } else {
            assert_eq!(
                seq,
                self.first + self.items.len() as u64,
                "a record added out of sequence"
            );
        }
        self.items.push_back(record);
    }

    /// Removes the oldest record kept.
    pub(super) fn pop_first(&mut self) -> Option<(u64, T)> {
        let record = self.items.pop_front()?;
        let seq = self.first;
        self.first += 1;
        Some((seq, record))
    }

    /// The records kept, oldest first, with their sequence numbers.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        (self.first..).zip(&self.items)
    }

    /// The records numbered `seq` and later, oldest first.
    pub(super) fn from(&self, seq: u64) -> impl Iterator<Item = (u64, &T)> {
        let skip = usize::try_from(seq.saturating_sub(self.first)).unwrap_or(usize::MAX);
        self.iter().skip(skip)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::Records;

    #[test]
    fn records_are_found_by_number_and_leave_oldest_first() {
        let mut r = Records::default();
        assert!(r.first().is_none());
        r.push(7, 'a');
        r.push(8, 'b');
        r.push(9, 'c');
        assert_eq!(r.get(6), None);
        assert_eq!(r.get(8), Some(&'b'));
        assert_eq!(r.get(10), None);
        *r.get_mut(9).expect("kept") = 'C';
        assert_eq!(r.from(8).collect::<Vec<_>>(), [(8, &'b'), (9, &'C')]);
        assert_eq!(r.from(3).count(), 3);
        assert_eq!(r.from(12).count(), 0);
        assert_eq!(r.pop_first(), Some((7, 'a')));
        assert_eq!(r.first(), Some((8, &'b')));
        assert_eq!(r.iter().map(|(s, _)| s).collect::<Vec<_>>(), [8, 9]);
        r.pop_first();
        r.pop_first();
        assert_eq!(r.pop_first(), None);
        // Empty, a record of any number starts it again.
        r.push(40, 'd');
        assert_eq!(r.first(), Some((40, &'d')));
    }

    #[test]
    #[should_panic(expected = "out of sequence")]
    fn a_record_that_skips_a_number_is_refused() {
        let mut r = Records::default();
        r.push(1, ());
        r.push(3, ());
    }
}
