//! The lab: the papers' experiments run on the deterministic simulator with the real cores.
//!
//! - [`volumes`]: volumes of one server hosting off-loading clients and stores, driven by
//!   open-loop trace replay or closed-loop load.
//! - [`everest`]: `cordillera lab everest`, Everest §4.1 and §4.3.
//! - [`bonfire`]: `cordillera lab bonfire`, Bonfire §4.3 and §6.1 on the cache simulator;
//!   [`bonfire_overheads`]: its §6.3 (Table 4).
//! - [`sierra`]: `cordillera lab sierra`, Sierra §2 and §4.
//! - [`render`]: the reports as tables, CSV files and SVG figures.
//! - [`advise`]: `cordillera advise`: each mechanism's verdict on a trace, from the labs;
//!   [`devices`]: the user's device it judges on (given, or fitted from recorded response
//!   times); [`mrc`]: the trace's miss-ratio curve from exact stack distances.
//! - [`input`]: the trace a command or a lab reads (a file or a generated workload), record by
//!   record.
//! - [`spread`]: several seeds of a lab: each headline figure's mean, range and deviation.
//! - [`striping`]: `cordillera lab striping`, the striping paper's Figures 2–10 and Table 3 on
//!   the pool of `cordillera-striping`.
//! - [`tools`]: the command line's tools over a trace: `trace convert`, `warmup simulate`,
//!   `sim replay`.

pub mod advise;
pub mod bonfire;
pub mod bonfire_overheads;
pub mod devices;
pub mod everest;
pub mod input;
pub mod mrc;
pub mod render;
pub mod sierra;
pub mod spread;
pub mod striping;
pub mod tools;
pub mod volumes;
