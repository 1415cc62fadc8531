//! The deterministic discrete-event simulator: the virtual world in which the lab evaluates
//! mechanisms on traces and the tests run seeded fault schedules.
//!
//! # Layout
//!
//! - [`kernel`]: virtual time ([`kernel::Nanos`]), the event queue with deterministic
//!   tie-breaking, and the run hash that proves two runs identical.
//! - [`rng`]: one seeded ChaCha8 stream per component.
//! - [`device`]: the [`device::Device`] trait (its driver contract is written there) and the
//!   models: [`device::hdd`], [`device::ssd`], [`device::nvram`], [`device::raid`].
//! - [`presets`]: named, calibrated devices (`cheetah-15k`, `fujitsu-maj3182mc`, …) and array specs.
//! - [`bench`]: closed-loop microbenchmarks (`sim disk`), the calibration targets.
//! - [`replay`]: open-loop replay of a trace on a device (`sim replay`).
//! - [`calibration`]: each preset against the figure its paper (or datasheet class) publishes.
//! - [`histogram`]: latency histograms in constant memory (percentiles within 1.6 %).
//! - [`network`]: NICs, racks, top-of-rack switches and uplinks.
//! - [`power`]: server power states, their draw and transition times.
//! - [`storage`]: what a simulated disk holds and what a crash does to it (the fault model of
//!   `docs/SIMULATION.md`).
//! - [`workload`]: generated workloads calibrated to the papers (`gen:…`).
//! - [`world`]: nodes hosting sans-I/O cores on the network, each with a disk, driven in
//!   virtual time with injected crashes.

pub mod bench;
pub mod calibration;
pub mod device;
pub mod histogram;
pub mod kernel;
pub mod network;
pub mod power;
pub mod presets;
pub mod replay;
pub mod rng;
pub mod storage;
pub mod workload;
pub mod world;
