//! Storage-level cache warm-up (Bonfire, `../shared/papers/bonfire-cache-warmup.md`).
//!
//! - [`cache`]: block caches behind one trait, [`cache::Cache`]: LRU exactly as the paper's
//!   simulator (every access moves the block to the most-recent end; a miss inserts it and
//!   evicts the least recent), FIFO and CLOCK.
//! - [`sim`]: a trace or generated workload driven through a cache at 4 KiB block granularity;
//!   reads and writes both insert or refresh the blocks they touch, hits are counted for reads.

pub mod algorithms;
pub mod cache;
pub mod preload;
pub mod schemes;
pub mod sim;
