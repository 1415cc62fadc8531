//! Bonfire's decision tree (Figure 8, §4.3.3): from a volume's reaccess classes (§3's
//! characterization) to the warm-up algorithm to use, and why.

use cordillera_trace::reaccess::VolumeReaccess;
use serde::Serialize;

use crate::algorithms::Algorithm;
use crate::sim::BLOCK_BYTES;

/// The reaccess figures the decision tree reads (Bonfire §3).
#[derive(Clone, Debug, Serialize)]
pub struct ReaccessClasses {
    pub reaccess_pct: Option<f64>,
    /// Percentages of the reaccessed blocks (classes overlap; Figure 1a).
    pub hourly_block_pct: f64,
    pub daily_block_pct: f64,
    pub other_block_pct: f64,
    /// Percentage of reaccesses within 10 MiB of reuse distance (Figure 3).
    pub reuse_under_10mib_pct: f64,
    /// The hour (of the trace's clock) with the most daily reaccesses.
    pub daily_peak_hour: Option<u32>,
}

/// Figure 8's choice and the branch that led to it.
#[derive(Clone, Debug, Serialize)]
pub struct Recommendation {
    pub algorithm: Algorithm,
    pub because: String,
    /// For a daily pattern: start the new cache just before this hour.
    pub start_at_hour: Option<u32>,
}

/// A block is "daily" in the decision tree's sense when at least this percentage of reaccessed
/// blocks show the daily class and it is not less than the hourly class.
pub const DAILY_PATTERN_MIN_PCT: f64 = 10.0;

impl ReaccessClasses {
    pub fn from_report(r: &VolumeReaccess) -> ReaccessClasses {
        let class = |name: &str| {
            r.classes
                .iter()
                .find(|c| c.class == name)
                .and_then(|c| c.block_pct)
                .unwrap_or(0.0)
        };
        let reaccesses: u64 = r.reuse_distance.iter().map(|b| b.reaccesses).sum();
        let near = r.reuse_distance.first().map_or(0, |b| b.reaccesses);
        let peak = (0..24).max_by_key(|h| (r.daily_by_hour[*h], std::cmp::Reverse(*h)));
        ReaccessClasses {
            reaccess_pct: r.reaccess_pct,
            hourly_block_pct: class("hourly"),
            daily_block_pct: class("daily"),
            other_block_pct: class("other"),
            reuse_under_10mib_pct: if reaccesses > 0 {
                100.0 * near as f64 / reaccesses as f64
            } else {
                0.0
            },
            daily_peak_hour: peak.filter(|h| r.daily_by_hour[*h] > 0).map(|h| h as u32),
        }
    }

    /// The decision tree of Figure 8 (Bonfire §4.3.3):
    /// - a known daily pattern → First-K, with the cache started just before the daily
    ///   reaccesses (the wall-clock box of the figure);
    /// - mostly hourly reaccesses → Last-K;
    /// - mostly other reaccesses → Last-K when reuse distances are small (most within 10 MiB);
    ///   when they are big, First-K for small (4 KiB) regions and Last-K (or Top-K) for big ones.
    pub fn recommend(&self, region_bytes: u64) -> Recommendation {
        if self.daily_block_pct >= DAILY_PATTERN_MIN_PCT
            && self.daily_block_pct >= self.hourly_block_pct
        {
            return Recommendation {
                algorithm: Algorithm::FirstK,
                because: format!(
                    "daily pattern ({:.0} % of reaccessed blocks daily, {:.0} % hourly): start the cache just before the daily reaccesses",
                    self.daily_block_pct, self.hourly_block_pct
                ),
                start_at_hour: self.daily_peak_hour,
            };
        }
        if self.hourly_block_pct >= self.other_block_pct {
            return Recommendation {
                algorithm: Algorithm::LastK,
                because: format!(
                    "hourly reaccesses dominate ({:.0} % of reaccessed blocks)",
                    self.hourly_block_pct
                ),
                start_at_hour: None,
            };
        }
        let (algorithm, because) = if self.reuse_under_10mib_pct >= 50.0 {
            (Algorithm::LastK, "other reaccesses, small reuse distance")
        } else if region_bytes <= BLOCK_BYTES {
            (
                Algorithm::FirstK,
                "other reaccesses, big reuse distance, small regions",
            )
        } else {
            (
                Algorithm::LastK,
                "other reaccesses, big reuse distance, big regions (Last-K or Top-K)",
            )
        };
        Recommendation {
            algorithm,
            because: format!(
                "{because} ({:.0} % of reaccesses within 10 MiB)",
                self.reuse_under_10mib_pct
            ),
            start_at_hour: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_decision_tree_follows_figure_8() {
        let c = |hourly, daily, other, near| ReaccessClasses {
            reaccess_pct: Some(50.0),
            hourly_block_pct: hourly,
            daily_block_pct: daily,
            other_block_pct: other,
            reuse_under_10mib_pct: near,
            daily_peak_hour: Some(2),
        };
        let daily = c(20.0, 60.0, 30.0, 10.0).recommend(MIB);
        assert_eq!(daily.algorithm, Algorithm::FirstK);
        assert_eq!(daily.start_at_hour, Some(2));
        assert_eq!(
            c(80.0, 5.0, 30.0, 10.0).recommend(MIB).algorithm,
            Algorithm::LastK
        );
        assert_eq!(
            c(10.0, 5.0, 90.0, 80.0).recommend(4096).algorithm,
            Algorithm::LastK
        );
        assert_eq!(
            c(10.0, 5.0, 90.0, 20.0).recommend(4096).algorithm,
            Algorithm::FirstK
        );
        assert_eq!(
            c(10.0, 5.0, 90.0, 20.0).recommend(MIB).algorithm,
            Algorithm::LastK
        );
    }
}
