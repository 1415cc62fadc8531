//! The versioned short-term log store: the Everest store (Everest §3.1) and the Sierra logger
//! (Sierra §3.6). The real driver is `cordillera-runtime`'s store server; the simulated
//! driver is the sim `World` (see `tests/durability.rs`).
//!
//! # Layout
//!
//! - [`format`]: superblock and record encoding, version 1 (`docs/FORMATS.md`).
//! - [`index`]: a client's valid ranges, split on overlap, with per-record live bytes.
//! - [`store`]: the sans-I/O core: append, group commit, ordered acks, tail, recovery.

pub mod format;
pub mod index;
pub mod store;
