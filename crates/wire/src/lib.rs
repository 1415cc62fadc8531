//! Wire protocols.
//!
//! # Layout
//!
//! - [`store`]: the versioned store's protocol: framing, requests, replies and load figures
//!   (`docs/FORMATS.md`, "Store protocol").
//! - [`nbd`]: the NBD protocol's messages for a server (handshake, options, requests, replies).
//! - [`mds_journal`]: the MDS's state as batches of changes, for etcd.
//! - [`sierra`]: Sierra's messages between the MDS, chunk servers and clients, and the frames
//!   that carry them (`docs/FORMATS.md`, "Sierra protocol").
//! - [`psk`]: pre-shared keys files (`identity:hexkey` lines, as GnuTLS's `psktool` writes
//!   them and nbdkit, qemu-nbd and libnbd read them).
//! - [`peers`]: a store's peer bindings file (each client id bound to the authenticated peer
//!   that first used it).
//! - `codec`: the field reader and writer the three share (private).

mod codec;
pub mod mds_journal;
pub mod nbd;
pub mod peers;
pub mod psk;
pub mod sierra;
pub mod store;
