//! Sierra, the power-proportional replicated store (`../shared/papers/sierra-power-proportional-store.md`),
//! as sans-I/O pieces the simulator and the daemons both drive.
//!
//! # Layout
//!
//! - [`model`]: servers, racks, objects, chunks, chunk groups and the paper's defaults (§3.1, §3.5).
//! - [`layout`]: naive random, naive grouping and power-aware grouping, with racks aligned or
//!   rotated (§3.3, Table 1, Figures 4–5): which servers can be off in each gear, and the rebuild
//!   parallelism.
//! - [`load`]: the load metric L in servers needed (§3.4), from per-second samples of
//!   cluster-total reads and writes split into sequential and random I/O.
//! - [`schedule`]: per-hour peaks, the hour-of-day predictor, gears from loads with g_min, the
//!   rotation of gear groups across days, the maintenance override, and the prediction's error
//!   (§3.4, §4.1, Figure 8).
//! - [`predict`]: the hour-of-day predictor against baselines (yesterday, last week, the
//!   oracle): error, gear-hours right, hours under-geared, energy.
//! - [`learned`]: the same scheduler on a running cluster: the chunk servers' per-second counts
//!   summed into L, each hour's peak kept, each day planned from the days before it.
//! - [`protocol`]: the messages between the MDS, chunk servers and clients (§3.1, §3.5, §3.7).
//! - [`mds`]: the metadata service: objects → chunks → groups → replicas and primary,
//!   heartbeats and leases, primary migration, gear shifts and standby, failures and rebuild,
//!   and what it keeps across a restart (`mds::persist`).
//! - [`server`]: a chunk server: leases, primaries serving through their log client (logging
//!   mode), replication with epoch fencing, rebuild, standby; where its groups lie on its
//!   disk (`server::GroupPlacement`, for the runtime and the simulator alike).
//! - [`client`]: the client library (§3.8): object layouts cached from the MDS, requests cut at
//!   chunk boundaries, bounded retries.

pub mod client;
pub mod layout;
pub mod learned;
pub mod load;
pub mod mds;
pub mod model;
pub mod predict;
pub mod protocol;
pub mod schedule;
pub mod server;
