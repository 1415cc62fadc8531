//! A volume as the lab saw it: its reaccess classes (Bonfire §3's characterization) and the
//! recommendation Figure 8's decision tree (`cordillera_warmup::decision`) draws from them.

use super::*;
pub use cordillera_warmup::decision::{ReaccessClasses, Recommendation, DAILY_PATTERN_MIN_PCT};

/// A volume of the trace, as the lab saw it.
#[derive(Clone, Debug, Serialize)]
pub struct VolumeSummary {
    pub volume: String,
    pub requests: usize,
    pub read_requests: usize,
    pub working_set_blocks: u64,
    pub days: usize,
    /// Why the volume was left out, if it was.
    pub skipped: Option<String>,
    pub reaccess: Option<ReaccessClasses>,
    pub recommendation: Option<Recommendation>,
    /// The algorithm best (ties included) at the middle setting on more days than any other,
    /// and on how many of the warmed days; `None` when the top is shared.
    pub measured_best: Option<Algorithm>,
    pub measured_best_days: usize,
    pub warmed_days: usize,
}
