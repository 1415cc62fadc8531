//! Wire protocols.
//!
//! # Layout
//!
//! - [`store`]: the versioned store's protocol: framing, requests, replies and load figures
//!   (`docs/FORMATS.md`, "Store protocol").
//! - [`nbd`]: the NBD protocol's messages for a server (handshake, options, requests, replies).

pub mod nbd;
pub mod store;
