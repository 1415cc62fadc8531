//! The versioned short-term log store: the Everest store (Everest §3.1) and the Sierra logger
//! (Sierra §3.6). Work in progress: the on-disk format is here; the index, the sans-I/O core,
//! recovery and the drivers follow.
//!
//! # Layout
//!
//! - [`format`]: superblock and record encoding, version 1 (`docs/FORMATS.md`).

pub mod format;
