//! The deterministic discrete-event simulator: the virtual world in which the lab evaluates
//! mechanisms on traces and the tests run seeded fault schedules. The hardware it simulates
//! (disks, arrays, power) is modelled in `cordillera-models`, apart from it.
//!
//! # Layout
//!
//! - [`kernel`]: virtual time ([`kernel::Nanos`]), the event queue with deterministic
//!   tie-breaking, and the run hash that proves two runs identical.
//! - [`rng`]: one seeded ChaCha8 stream per component.
//! - [`replay`]: open-loop replay of a trace on a device (`sim replay`).
//! - [`network`]: NICs, racks, top-of-rack switches and uplinks.
//! - [`storage`]: what a simulated disk holds and what a crash does to it (the fault model of
//!   `docs/SIMULATION.md`).
//! - [`workload`]: generated workloads calibrated to the papers (`gen:…`).
//! - [`world`]: nodes hosting sans-I/O cores on the network, each with a disk, driven in
//!   virtual time with injected crashes.

pub mod kernel;
pub mod network;
pub mod replay;
pub mod rng;
pub mod storage;
pub mod workload;
pub mod world;
