//! The versioned short-term log store: the Everest store (Everest §3.1) and the Sierra logger
//! (Sierra §3.6). Work in progress: the on-disk format and the index are here; the sans-I/O
//! core, recovery and the drivers follow.
//!
//! # Layout
//!
//! - [`format`]: superblock and record encoding, version 1 (`docs/FORMATS.md`).
//! - [`index`]: a client's valid ranges, split on overlap, with per-record live bytes.

pub mod format;
pub mod index;
