//! The Everest off-loading client (Everest §3.2), as a sans-I/O state machine.
//!
//! # Layout
//!
//! - [`client`]: the core. Upward block reads and writes in; base-volume I/O and store requests
//!   out. It decides where each write goes, splits reads by its range map, reclaims off-loaded
//!   data when the base volume is quiet, keeps N copies, and rebuilds its soft state from the
//!   stores after a crash.
//! - [`superblock`]: the only state the client keeps on its base volume: the store set.
//! - [`records`]: deletion records, the persistent queue of deletes owed to failed stores.
//!
//! The same core runs on the simulator (`crates/offload/tests`, `cordillera lab everest`) and,
//! later, in the volume server.

pub mod client;
pub mod records;
pub mod superblock;

pub use client::{
    BaseDone, BaseOp, Client, ClientError, Config, Loc, Policy, RecoveryWait, Stats, StoreFigures,
    StoreIdx, StoreInfo, UpReply, Upward,
};
