//! Wire protocols.
//!
//! # Layout
//!
//! - [`store`]: the versioned store's protocol: framing, requests, replies and load figures
//!   (`docs/FORMATS.md`, "Store protocol").

pub mod store;
