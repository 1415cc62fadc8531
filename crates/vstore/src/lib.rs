//! The versioned short-term log store: the Everest store (Everest §3.1) and the Sierra logger
//! (Sierra §3.6). Work in progress: format, index and the sans-I/O core are here; the real
//! and simulated drivers follow.
//!
//! # Layout
//!
//! - [`format`]: superblock and record encoding, version 1 (`docs/FORMATS.md`).
//! - [`index`]: a client's valid ranges, split on overlap, with per-record live bytes.
//! - [`store`]: the sans-I/O core: append, group commit, ordered acks, tail, recovery.

pub mod format;
pub mod index;
pub mod store;
