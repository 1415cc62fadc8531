//! The lab: the papers' experiments run on the deterministic simulator with the real cores.
//!
//! - [`volumes`]: volumes of one server hosting off-loading clients and stores, driven by
//!   open-loop trace replay or closed-loop load.
//! - [`everest`]: `cordillera lab everest`, Everest §4.1 and §4.3.

pub mod everest;
pub mod volumes;
