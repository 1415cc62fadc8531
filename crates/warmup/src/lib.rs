//! Storage-level cache warm-up (Bonfire, `../shared/papers/bonfire-cache-warmup.md`).
//!
//! - [`cache`]: block caches behind one trait, [`cache::Cache`]: LRU exactly as the paper's
//!   simulator (every access moves the block to the most-recent end; a miss inserts it and
//!   evicts the least recent), FIFO and CLOCK.
//! - [`sim`]: a trace or generated workload driven through a cache at 4 KiB block granularity;
//!   reads and writes both insert or refresh the blocks they touch, hits are counted for reads.
//! - [`multi`]: LRU at several cache sizes in one pass (Mattson's stack with markers).
//! - [`schemes`], [`algorithms`], [`decision`]: §4's cold / always-warm / warmed schemes, the
//!   warm-up algorithms and Figure 8's decision tree choosing among them (the pre-load's timing on a disk model is the lab's, `cordillera_lab::bonfire`).
//! - [`wlog`]: §5's monitoring log (staging buffers, the circular log, the pre-load plan) and
//!   [`data_cache`]: the DRAM block cache the volume server puts above its volume.
//! - [`warm`]: the cache mechanism as a sans-I/O core (coherence tickets, monitoring into the
//!   log, the pre-load and its pacing, hit-rate samples), driven by the volume server and by the
//!   simulation tests.

pub mod algorithms;
pub mod cache;
pub mod data_cache;
pub mod decision;
pub mod multi;
pub mod schemes;
pub mod sim;
pub mod warm;
pub mod wlog;
