//! Block caches. A cache holds at most `capacity` block numbers; [`Cache::access`] touches a
//! block (a hit refreshes it as the policy says, a miss inserts it, evicting one block when
//! full) and tells whether it was present.

use serde::Serialize;

/// A replacement policy over block numbers.
pub trait Cache {
    /// Touches `block`; returns whether it was cached before.
    fn access(&mut self, block: u64) -> bool;
    fn contains(&self, block: u64) -> bool;
    fn len(&self) -> usize;
    fn capacity(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The policies, by name (`lru`, `fifo`, `clock`, `sieve`, `s3fifo`, `arc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Lru,
    Fifo,
    Clock,
    Sieve,
    S3Fifo,
    Arc,
}

impl Policy {
    /// Every policy, in the order benchmarks print them.
    pub const ALL: [Policy; 6] = [
        Policy::Lru,
        Policy::Fifo,
        Policy::Clock,
        Policy::Sieve,
        Policy::S3Fifo,
        Policy::Arc,
    ];
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        match s {
            "lru" => Ok(Policy::Lru),
            "fifo" => Ok(Policy::Fifo),
            "clock" => Ok(Policy::Clock),
            "sieve" => Ok(Policy::Sieve),
            "s3fifo" => Ok(Policy::S3Fifo),
            "arc" => Ok(Policy::Arc),
            other => Err(format!(
                "unknown cache policy {other:?} (lru, fifo, clock, sieve, s3fifo, arc)"
            )),
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Policy::Lru => "lru",
            Policy::Fifo => "fifo",
            Policy::Clock => "clock",
            Policy::Sieve => "sieve",
            Policy::S3Fifo => "s3fifo",
            Policy::Arc => "arc",
        })
    }
}

pub(crate) const NIL: u32 = u32::MAX;

#[inline]
fn hash(block: u64) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(block)
}

mod arc;
mod clock;
mod fifo;
pub(crate) mod list;
mod lru;
mod s3fifo;
mod sieve;

pub use arc::ArcCache;
pub use clock::Clock;
pub use fifo::Fifo;
pub use lru::Lru;
pub use s3fifo::S3Fifo;
pub use sieve::Sieve;

/// A cache of `policy` holding `capacity` blocks.
pub fn build(policy: Policy, capacity: usize) -> Box<dyn Cache> {
    match policy {
        Policy::Lru => Box::new(Lru::new(capacity)),
        Policy::Fifo => Box::new(Fifo::new(capacity)),
        Policy::Clock => Box::new(Clock::new(capacity)),
        Policy::Sieve => Box::new(Sieve::new(capacity)),
        Policy::S3Fifo => Box::new(S3Fifo::new(capacity)),
        Policy::Arc => Box::new(ArcCache::new(capacity)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_capacity_cache_never_hits() {
        for policy in Policy::ALL {
            let mut c = build(policy, 0);
            assert!(!c.access(7) && !c.access(7), "{policy}");
            assert!(c.is_empty());
        }
    }

    #[test]
    fn policies_parse_by_name() {
        assert_eq!("clock".parse::<Policy>().unwrap(), Policy::Clock);
        assert_eq!("arc".parse::<Policy>().unwrap(), Policy::Arc);
        assert!("lfu".parse::<Policy>().is_err());
    }
}
