//! Models of hardware, apart from any simulator: what the simulator's nodes, the runtime's
//! emulated devices and the striping core all use.
//!
//! # Layout
//!
//! - [`device`]: the [`device::Device`] trait (its driver contract is written there) and the
//!   models: [`device::hdd`], [`device::ssd`], [`device::nvram`], [`device::raid`] (RAID
//!   levels and their geometry: where a request's bytes and parity go on the members).
//! - [`presets`]: named, calibrated devices (`cheetah-15k`, `fujitsu-maj3182mc`, …) and array
//!   specs.
//! - [`bench`]: closed-loop microbenchmarks of a device (`sim disk`), the calibration targets.
//! - [`calibration`]: each preset against the figure its paper (or datasheet class) publishes.
//! - [`histogram`]: latency histograms in constant memory (percentiles within 1.6 %).
//! - [`power`]: server power states, their draw and transition times.

pub mod bench;
pub mod calibration;
pub mod device;
pub mod histogram;
pub mod power;
pub mod presets;
