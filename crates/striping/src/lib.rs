//! Narrow and wide striping (Goyal, Radkov, Shenoy: "Evaluation of Object Placement Techniques
//! in a Policy-Managed Storage System") as a sans-I/O core.
//!
//! A [`pool::Pool`] is a set of RAID arrays shared by many volumes ("stores" in the paper).
//! Each volume has, on every array it uses, one contiguous extent at the same offset of each of
//! that array's disks, and its own stripe unit. A *narrow* volume uses one array; a *wide*
//! volume is concatenated over all arrays and striped across them: its stripe unit `k` goes to
//! array `k mod n`, and within an array the volume's part is laid out as the array's RAID level
//! lays out a volume of its own (RAID-5 left-symmetric by default), with the same stripe unit.
//! So a 2 MB request with a 1 MB stripe unit touches two disks under either policy (§3.2.2).
//!
//! # Layout
//!
//! - [`pool`]: arrays, volumes placed narrow or wide, free space, a request's segments on the
//!   member disks.
//! - [`policy`]: the stripe unit rule, the greedy partitioner, anti-correlation pairing and the
//!   paper's advice.
//! - [`layout`]: the pool's durable layout record (docs/FORMATS.md).
//! - [`restripe`]: moving a volume to a new layout while it serves I/O.
//! - [`members`]: arrays whose member devices the pool runs itself: labels, degraded I/O, the
//!   journal of degraded RAID-5 writes, resync, rebuild, scrub.
//!
//! The pool on the simulator and the paper's experiments (§3.2–3.5) are the lab's
//! (`cordillera_lab::striping`).

pub mod layout;
pub mod members;
pub mod policy;
pub mod pool;
pub mod restripe;

pub use pool::{ArraySpec, Extent, Pool, PoolError, Segment, Volume, VolumeId};
