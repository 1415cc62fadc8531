//! Doubly linked lists threaded through an array of entries by slot number: what LRU, SIEVE,
//! ARC and the several-size LRU keep their blocks' order in. An entry holds its two neighbours'
//! slots ([`Links`]); a [`List`] holds its two ends and its length. Moving an entry touches it
//! and its neighbours and allocates nothing; `NIL` is "none".

use super::NIL;

/// An entry's neighbours on its list: towards the newest end and towards the oldest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Links {
    pub newer: u32,
    pub older: u32,
}

impl Links {
    /// On no list yet.
    pub const NONE: Links = Links {
        newer: NIL,
        older: NIL,
    };
}

/// An entry that can be on a [`List`].
pub(crate) trait Linked {
    fn links(&self) -> Links;
    fn links_mut(&mut self) -> &mut Links;
}

/// [`Linked`] for an entry type whose links are its field `links`.
macro_rules! linked_by_field {
    ($entry:ty) => {
        impl $crate::cache::list::Linked for $entry {
            #[inline]
            fn links(&self) -> $crate::cache::list::Links {
                self.links
            }
            #[inline]
            fn links_mut(&mut self) -> &mut $crate::cache::list::Links {
                &mut self.links
            }
        }
    };
}
pub(crate) use linked_by_field;

/// The ends of one list and how many entries it holds; the entries hold the links between.
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    pub newest: u32,
    pub oldest: u32,
    pub len: usize,
}

impl List {
    pub const EMPTY: List = List {
        newest: NIL,
        oldest: NIL,
        len: 0,
    };

    /// Takes entry `i`, which is on this list, off it.
    #[inline]
    pub fn unlink<E: Linked>(&mut self, entries: &mut [E], i: u32) {
        let Links { newer, older } = entries[i as usize].links();
        match newer {
            NIL => self.newest = older,
            n => entries[n as usize].links_mut().older = older,
        }
        match older {
            NIL => self.oldest = newer,
            o => entries[o as usize].links_mut().newer = newer,
        }
        self.len -= 1;
    }

    /// Puts entry `i`, on no list, at this list's newest end.
    #[inline]
    pub fn push_newest<E: Linked>(&mut self, entries: &mut [E], i: u32) {
        let newest = self.newest;
        *entries[i as usize].links_mut() = Links {
            newer: NIL,
            older: newest,
        };
        match newest {
            NIL => self.oldest = i,
            n => entries[n as usize].links_mut().newer = i,
        }
        self.newest = i;
        self.len += 1;
    }

    /// Moves entry `i`, on this list, to its newest end.
    #[inline]
    pub fn touch<E: Linked>(&mut self, entries: &mut [E], i: u32) {
        if self.newest != i {
            self.unlink(entries, i);
            self.push_newest(entries, i);
        }
    }

    /// The entries' slots from the newest to the oldest.
    pub fn slots<'a, E: Linked>(&self, entries: &'a [E]) -> impl Iterator<Item = u32> + 'a {
        std::iter::successors(Some(self.newest).filter(|&i| i != NIL), move |&i| {
            Some(entries[i as usize].links().older).filter(|&o| o != NIL)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy)]
    struct E {
        links: Links,
    }
    linked_by_field!(E);

    /// Random pushes, touches and unlinks on two lists over one array of entries give the
    /// same orders as two vectors, and every link agrees with its neighbour's.
    #[test]
    fn two_lists_over_one_array_keep_the_order_of_two_vectors() {
        let mut rng = cordillera_types::rng::SimRng::new(5, 0x115);
        let n = 40;
        let mut entries = vec![E { links: Links::NONE }; n];
        let mut lists = [List::EMPTY; 2];
        // Per list, newest first; `on[i]` is the list entry `i` is on.
        let mut model: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
        let mut on: Vec<Option<usize>> = vec![None; n];
        for _ in 0..20_000 {
            let i = rng.below(n as u64) as u32;
            match on[i as usize] {
                None => {
                    let l = rng.below(2) as usize;
                    lists[l].push_newest(&mut entries, i);
                    model[l].insert(0, i);
                    on[i as usize] = Some(l);
                }
                Some(l) if rng.chance(0.5) => {
                    lists[l].touch(&mut entries, i);
                    model[l].retain(|&j| j != i);
                    model[l].insert(0, i);
                }
                Some(l) => {
                    lists[l].unlink(&mut entries, i);
                    model[l].retain(|&j| j != i);
                    on[i as usize] = None;
                }
            }
            for l in 0..2 {
                let slots: Vec<u32> = lists[l].slots(&entries).collect();
                assert_eq!(slots, model[l]);
                assert_eq!(lists[l].len, model[l].len());
                assert_eq!(lists[l].oldest, *model[l].last().unwrap_or(&NIL));
                for w in slots.windows(2) {
                    assert_eq!(entries[w[1] as usize].links.newer, w[0]);
                }
            }
        }
    }
}
