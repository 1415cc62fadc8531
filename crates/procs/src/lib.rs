//! Real processes for the benchmarks (`cordillera-harness`), the command line (`cluster up`,
//! `cluster status`) and the tests, which reach them through `cordillera-testkit`.
//!
//! # Layout
//!
//! - [`process`]: processes started and waited for by what they print, killed when dropped;
//!   commands run to their end within a time limit ([`process::Bounded`]).
//! - [`cluster`]: a local Sierra cluster of real daemons (MDS, chunk servers, loggers), killed
//!   and restarted one at a time.
//! - [`nbd_loop`]: an NBD export as a loop device with a file system (nbdfuse, losetup,
//!   mkfs.ext4, mount).

pub mod cluster;
pub mod nbd_loop;
pub mod process;
