//! Sierra's daemons: the same cores as the simulator's (`cordillera_gears`), driven by real
//! time, TCP connections (`net`, the Sierra protocol) and files.
//!
//! - [`spec`]: the cluster's description, which the MDS keeps and hands out.
//! - [`net`]: connections between the daemons.
//! - [`mds`]: `cordillera cluster mds`: the MDS core, its state ([`mds_state`]) in an embedded
//!   database ([`mds_store`]) or in etcd ([`mds_etcd`], several MDS taking turns by
//!   [`mds_leader`]), the gear plan and gears set by hand.
//! - [`server`]: `cordillera cluster server`: a chunk server on a file, with standby for real
//!   and its power by the model ([`power`]); its client I/O per second goes to the MDS's gear
//!   scheduler ([`load_report`]).

pub mod load_report;
pub mod mds;
pub mod mds_etcd;
pub mod mds_leader;
pub mod mds_state;
pub mod mds_store;
pub mod net;
pub mod server;
pub mod spec;
pub mod volume;

/// Nanoseconds since `start`: the daemons' clock for their cores.
pub(crate) fn nanos_since(start: std::time::Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

/// A number unlikely to repeat across starts (the time and the process id, mixed): a daemon's
/// incarnation, a client's id.
pub(crate) fn random_u64() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    cordillera_types::SplitMix64(nanos ^ ((std::process::id() as u64) << 32)).next_u64()
}
