//! Storage-level cache warm-up (Bonfire, `../shared/papers/bonfire-cache-warmup.md`).
//!
//! - [`cache`]: block caches behind one trait, [`cache::Cache`]: LRU exactly as the paper's
//!   simulator (every access moves the block to the most-recent end; a miss inserts it and
//!   evicts the least recent), FIFO and CLOCK.
//! - [`sim`]: a trace or generated workload driven through a cache at 4 KiB block granularity;
//!   reads and writes both insert or refresh the blocks they touch, hits are counted for reads.
//! - [`schemes`], [`algorithms`], [`preload`]: §4's cold / always-warm / warmed schemes, the
//!   warm-up algorithms and the pre-load on a disk model.
//! - [`wlog`]: §5's monitoring log (staging buffers, the circular log, the pre-load plan) and
//!   [`data_cache`]: the DRAM block cache the volume server puts above its volume.

pub mod algorithms;
pub mod cache;
pub mod data_cache;
pub mod preload;
pub mod schemes;
pub mod sim;
pub mod wlog;
