//! Sierra's daemons: the same cores as the simulator's (`cordillera_gears`), driven by real
//! time, TCP connections (`net`, the Sierra protocol) and files.
//!
//! - [`spec`]: the cluster's description, which the MDS keeps and hands out.
//! - [`net`]: connections between the daemons.
//! - [`mds`]: `cordillera cluster mds`: the MDS core, its state in an embedded database
//!   ([`mds_store`]), the gear plan and gears set by hand.
//! - [`server`]: `cordillera cluster server`: a chunk server on a file, with standby for real
//!   and its power by the model ([`power`]).

pub mod mds;
pub mod mds_store;
pub mod net;
pub mod power;
pub mod server;
pub mod spec;
pub mod volume;

/// Nanoseconds since `start`: the daemons' clock for their cores.
pub(crate) fn nanos_since(start: std::time::Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}
