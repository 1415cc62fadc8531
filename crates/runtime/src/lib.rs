//! The real driver of the sans-I/O cores: files and block devices, TCP.
//!
//! # Layout
//!
//! - [`disk`]: a file or block device executing the cores' disk operations with positional I/O
//!   on worker threads (`pwrite`, `pread`, `fdatasync`), and a synchronous driver for offline use.
//! - [`store_server`]: `cordillera store serve`: the store core behind the store protocol.
//! - [`store_link`]: a client's connection to a store, kept up (volume servers, chunk servers).
//! - [`nbd_server`]: an NBD server exporting a [`nbd_server::Backend`] (a file or block device).
//! - [`volume_server`]: `cordillera volume serve`: a base volume exported over NBD with the
//!   off-loading client core between, sending writes to stores when the base volume is loaded.
//! - [`nbd_client`], [`replay`]: `cordillera replay`, a trace replayed against a live NBD export.
//! - [`record_trace`]: `volume serve --record-trace`, the volume's requests as a trace.
//! - [`limits`]: connections and memory one client can take from a daemon; `accept` that
//!   backs off when descriptors run out.
//! - [`emulate`]: real-time disk emulation with the simulator's device models.
//! - [`sierra`]: Sierra's daemons — the MDS (with its gear plan and durable state, in redb or,
//!   several MDS taking turns, in etcd), chunk servers, and the object client behind a cluster
//!   volume — over the Sierra protocol.
//! - [`etcd`]: a blocking client of etcd's v3 JSON gateway (ranges, transactions, leases).
//! - [`http`]: the daemons' `/metrics` and `/status` endpoint, and a blocking client for it.
//! - [`logging`]: the daemons' structured logs on standard error (text or JSON).
//! - [`power`]: a daemon's time up, busy and in standby, and its energy by the power model
//!   (chunk servers and stores report it).
//! - [`warm_cache`]: the volume server's DRAM cache with Bonfire's monitoring log and pre-load.
//! - [`pool_server`]: `cordillera pool serve`: volumes placed narrow or wide on RAID arrays,
//!   exported over NBD, restriped online; member arrays with rebuild and scrub.
//! - [`tls`]: TLS on the daemons' ports, with pre-shared keys or X.509 certificates.
//! - [`signals`]: a flag SIGINT or SIGTERM sets, for a supervising loop.

pub mod disk;
pub mod emulate;
pub mod etcd;
pub mod http;
pub mod limits;
pub mod logging;
pub mod nbd_client;
pub mod nbd_server;
pub mod pool_server;
pub mod power;
pub mod record_trace;
pub mod replay;
pub mod sierra;
pub mod signals;
pub mod store_link;
pub mod store_server;
pub mod tls;
pub mod volume_server;
pub mod warm_cache;
