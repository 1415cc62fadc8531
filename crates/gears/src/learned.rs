//! The gear scheduler of a running cluster (§3.4), without I/O: chunk servers count their I/O
//! second by second ([`ServerSecond`]: random reads and writes, sequential bytes each way, as
//! [`crate::load`] classifies them) and report it; the MDS sums the servers' counts of each
//! second, turns the second into L ([`Load::of`]), and keeps each hour's peak (§3.4's default),
//! mean and coverage. Every hour of day D is then planned from the hours of the days before D:
//! the hour-of-day prediction (the mean of that hour over the earlier days, hours seen for at
//! least half their length), the lowest gear ≥ g_min that sustains it, the maintenance hours in
//! gear r, the gear groups rotated by the day — what [`HourOfDayPredictor`] computes offline from
//! the same hours (a test). An hour with no earlier day runs in gear r.
//!
//! Hours are `hour_seconds` long (3,600; fewer to compress days in tests and demos) and counted
//! from the Unix epoch, as the fixed plan's are; rates stay per real second. A server's report
//! for a second the scheduler has already closed is late: counted in [`Scheduler::late`] and
//! dropped (the MDS closes seconds a grace period after they end).

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::Serialize;

use crate::load::{HourLoad, Load, Rates, ServerPerformance};
use crate::schedule::{rotation, DayPlan, GearPolicy, HourOfDayPredictor};

/// Reports for seconds this far from the scheduler's clock (before its first closed second, or
/// after its last) are refused: a server's clock gone wrong, or a forged report, cannot make it
/// measure years of seconds or keep reports for the far future.
pub const REPORT_WINDOW_S: u64 = 3600;

/// One chunk server's I/O in one second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServerSecond {
    pub random_reads: u32,
    pub random_writes: u32,
    pub sequential_read_bytes: u64,
    pub sequential_write_bytes: u64,
    /// Every request (random and sequential) and its bytes.
    pub requests: u32,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl ServerSecond {
    fn add(&mut self, o: &ServerSecond) {
        self.random_reads = self.random_reads.saturating_add(o.random_reads);
        self.random_writes = self.random_writes.saturating_add(o.random_writes);
        self.sequential_read_bytes = self
            .sequential_read_bytes
            .saturating_add(o.sequential_read_bytes);
        self.sequential_write_bytes = self
            .sequential_write_bytes
            .saturating_add(o.sequential_write_bytes);
        self.requests = self.requests.saturating_add(o.requests);
        self.read_bytes = self.read_bytes.saturating_add(o.read_bytes);
        self.write_bytes = self.write_bytes.saturating_add(o.write_bytes);
    }

    fn rates(&self) -> Rates {
        Rates {
            random_reads: self.random_reads as f64,
            random_writes: self.random_writes as f64,
            sequential_read_bytes: self.sequential_read_bytes as f64,
            sequential_write_bytes: self.sequential_write_bytes as f64,
        }
    }
}

/// Measured hours, the plan they give, and the reports that came too late.
#[derive(Clone, Debug)]
pub struct Scheduler {
    policy: GearPolicy,
    server: ServerPerformance,
    hour_seconds: u64,
    /// Seconds not yet closed, the servers' counts summed.
    open: BTreeMap<u64, ServerSecond>,
    /// Every second before this one is closed.
    closed_before: Option<u64>,
    /// The hour being measured (its `mean` holds the sum of L until the hour ends).
    current: Option<HourLoad>,
    hours: BTreeMap<i64, HourLoad>,
    late: u64,
    refused: u64,
    /// Plans already made, by day (cleared whenever an hour is added: the daemon asks for the
    /// gear on every step).
    plans: RefCell<BTreeMap<i64, DayPlan>>,
}

impl Scheduler {
    pub fn new(policy: GearPolicy, server: ServerPerformance, hour_seconds: u64) -> Scheduler {
        assert!(hour_seconds > 0, "an hour of at least a second");
        Scheduler {
            policy,
            server,
            hour_seconds,
            open: BTreeMap::new(),
            closed_before: None,
            current: None,
            hours: BTreeMap::new(),
            late: 0,
            refused: 0,
            plans: RefCell::new(BTreeMap::new()),
        }
    }

    /// Hours measured before a restart (from the MDS's durable state).
    pub fn restore(&mut self, hours: impl IntoIterator<Item = HourLoad>) {
        for h in hours {
            self.hours.insert(h.hour, h);
        }
        self.plans.borrow_mut().clear();
    }

    pub fn policy(&self) -> &GearPolicy {
        &self.policy
    }

    pub fn hour_seconds(&self) -> u64 {
        self.hour_seconds
    }

    /// The hour (counted from the epoch) of Unix second `second`.
    pub fn hour_of(&self, second: u64) -> i64 {
        (second / self.hour_seconds) as i64
    }

    /// One server's counts for Unix second `second`.
    pub fn report(&mut self, second: u64, counts: &ServerSecond) {
        if let Some(c) = self.closed_before {
            if second < c {
                self.late += 1;
                return;
            }
            if second - c >= REPORT_WINDOW_S {
                self.refused += 1;
                return;
            }
        }
        self.open.entry(second).or_default().add(counts);
    }

    /// Closes every second before `before`: each becomes one L sample of its hour (a second
    /// nobody reported is an idle one). Returns the hours that ended, for the caller to keep.
    pub fn close_before(&mut self, before: u64) -> Vec<HourLoad> {
        let from = match self.closed_before {
            Some(c) if c >= before => return Vec::new(),
            Some(c) => c,
            // The first call: measuring starts at the earliest second reported, or now, and
            // no more than the report window back.
            None => {
                let earliest = before.saturating_sub(REPORT_WINDOW_S);
                let kept = self.open.split_off(&earliest);
                self.refused += self.open.len() as u64;
                self.open = kept;
                self.open
                    .keys()
                    .next()
                    .copied()
                    .unwrap_or(before)
                    .min(before)
            }
        };
        let mut ended = Vec::new();
        for second in from..before {
            let counts = self.open.remove(&second).unwrap_or_default();
            let hour = self.hour_of(second);
            if self.current.is_some_and(|c| c.hour != hour) {
                ended.extend(self.end_hour());
            }
            let current = self.current.get_or_insert(HourLoad {
                hour,
                ..HourLoad::default()
            });
            let load = Load::of(&counts.rates(), &self.server, self.policy.replicas);
            debug_assert!(load.servers() >= 0.0, "a load is never negative");
            if load.servers() > current.peak {
                current.peak = load.servers();
                current.peak_nonsequential = load.nonsequential;
                current.peak_sequential = load.sequential;
            }
            current.mean += load.servers();
            current.covered_s += 1;
            debug_assert!(
                current.covered_s <= self.hour_seconds,
                "hour {} saw more seconds than it has",
                current.hour
            );
            current.requests += counts.requests as u64;
            current.bytes += counts.read_bytes + counts.write_bytes;
            current.write_bytes += counts.write_bytes;
        }
        // A long gap (the MDS was down) leaves no open seconds behind.
        self.open = self.open.split_off(&before);
        debug_assert!(
            self.open.keys().all(|&s| s >= before),
            "a closed second left open"
        );
        self.closed_before = Some(before);
        if self.current.is_some_and(|c| self.hour_of(before) != c.hour) {
            ended.extend(self.end_hour());
        }
        ended
    }

    fn end_hour(&mut self) -> Option<HourLoad> {
        let mut h = self.current.take()?;
        h.mean /= h.covered_s.max(1) as f64;
        let kept = match self.hours.get(&h.hour) {
            // An hour measured in two lives of the MDS: the larger peak, the seconds added.
            Some(before) => HourLoad {
                peak: before.peak.max(h.peak),
                peak_nonsequential: if h.peak >= before.peak {
                    h.peak_nonsequential
                } else {
                    before.peak_nonsequential
                },
                peak_sequential: if h.peak >= before.peak {
                    h.peak_sequential
                } else {
                    before.peak_sequential
                },
                mean: (before.mean * before.covered_s as f64 + h.mean * h.covered_s as f64)
                    / (before.covered_s + h.covered_s).max(1) as f64,
                bytes: before.bytes + h.bytes,
                write_bytes: before.write_bytes + h.write_bytes,
                requests: before.requests + h.requests,
                covered_s: before.covered_s + h.covered_s,
                hour: h.hour,
            },
            None => h,
        };
        self.hours.insert(kept.hour, kept);
        self.plans.borrow_mut().clear();
        Some(kept)
    }

    /// Every hour measured, in order.
    pub fn hours(&self) -> impl Iterator<Item = &HourLoad> {
        self.hours.values()
    }

    /// The hour being measured so far (its mean over the seconds seen).
    pub fn current(&self) -> Option<HourLoad> {
        self.current.map(|mut h| {
            h.mean /= h.covered_s.max(1) as f64;
            h
        })
    }

    /// Reports that came after their second was closed.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// Reports for seconds outside the report window ([`REPORT_WINDOW_S`]).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Whether an hour was seen long enough to learn from (half of it or more).
    fn learnable(&self, h: &HourLoad) -> bool {
        h.covered_s * 2 >= self.hour_seconds
    }

    /// The predictor trained on every day before `day`.
    pub fn predictor(&self, day: i64) -> HourOfDayPredictor {
        let mut days: BTreeMap<i64, [Option<f64>; 24]> = BTreeMap::new();
        for h in self.hours.values() {
            if h.day() < day && self.learnable(h) {
                days.entry(h.day()).or_insert([None; 24])[h.hour_of_day()] = Some(h.peak);
            }
        }
        let mut p = HourOfDayPredictor::default();
        for d in days.values() {
            p.learn(d);
        }
        p
    }

    /// Day `day`'s plan, from the days before it.
    pub fn plan(&self, day: i64) -> DayPlan {
        if let Some(p) = self.plans.borrow().get(&day) {
            return p.clone();
        }
        let mut plan = self.predictor(day).plan(day, &self.policy);
        plan.rotation = rotation(day, self.policy.replicas);
        debug_assert!(
            plan.gears
                .iter()
                .all(|&g| (self.policy.g_min..=self.policy.replicas).contains(&g)),
            "a planned gear outside g_min..=r: {:?}",
            plan.gears
        );
        let mut plans = self.plans.borrow_mut();
        if plans.len() > 4 {
            plans.clear();
        }
        plans.insert(day, plan.clone());
        plan
    }

    /// The gear of `hour` (counted from the epoch).
    pub fn gear(&self, hour: i64) -> usize {
        self.plan(hour.div_euclid(24)).gears[hour.rem_euclid(24) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{days, HourMetric};

    fn policy() -> GearPolicy {
        GearPolicy::new(9, 3, 1, vec![2]).unwrap()
    }

    fn server() -> ServerPerformance {
        ServerPerformance {
            read_iops: 100.0,
            write_iops: 100.0,
            read_bytes_per_s: 1e8,
            write_bytes_per_s: 1e8,
        }
    }

    /// `reads` random reads in one second from one server.
    fn reads(n: u32) -> ServerSecond {
        ServerSecond {
            random_reads: n,
            requests: n,
            read_bytes: n as u64 * 4096,
            ..ServerSecond::default()
        }
    }

    #[test]
    fn servers_seconds_add_up_and_each_hour_keeps_its_peak() {
        // Hours of 10 s.
        let mut s = Scheduler::new(policy(), server(), 10);
        s.report(100, &reads(150));
        s.report(100, &reads(150));
        s.report(103, &reads(50));
        assert!(s.close_before(105).is_empty());
        let h = s.current().unwrap();
        // 300 reads in second 100 on servers of 100 IOPS: L = 3 servers.
        assert_eq!((h.hour, h.peak, h.covered_s, h.requests), (10, 3.0, 5, 350));
        assert!((h.mean - 3.5 / 5.0).abs() < 1e-12, "{}", h.mean);
        // The hour ends at second 110; a report for a closed second is late.
        s.report(104, &reads(10));
        assert_eq!(s.late(), 1);
        let ended = s.close_before(112);
        assert_eq!(ended.len(), 1);
        assert_eq!((ended[0].hour, ended[0].covered_s), (10, 10));
        assert_eq!(s.current().unwrap().hour, 11);
        // Writes count r times (§3.4).
        s.report(
            112,
            &ServerSecond {
                random_writes: 100,
                requests: 100,
                ..ServerSecond::default()
            },
        );
        s.close_before(113);
        assert_eq!(s.current().unwrap().peak, 3.0);
    }

    #[test]
    fn a_day_is_planned_from_the_days_before_it_as_the_offline_predictor_plans_it() {
        let hour_s = 4;
        let mut s = Scheduler::new(policy(), server(), hour_s);
        let day_s = 24 * hour_s;
        // Three days from day 10: a busy afternoon (hours 12–17), a quiet night, noise.
        let mut x: u64 = 7;
        for second in 10 * day_s..13 * day_s {
            let hour = (second / hour_s) % 24;
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let noise = (x >> 59) as u32;
            let n = if (12..18).contains(&hour) { 500 } else { 120 } + 20 * noise;
            s.report(second, &reads(n / 3));
            s.report(second, &reads(n - n / 3));
            if second >= 10 * day_s + 2 {
                s.close_before(second - 2);
            }
        }
        s.close_before(13 * day_s + 1);
        // Before any day: gear r everywhere.
        assert_eq!(s.plan(10).gears, [3; 24]);
        for day in 11..=13 {
            let offline = days(
                &s.hours()
                    .copied()
                    .filter(|h| h.day() < day)
                    .collect::<Vec<_>>(),
                HourMetric::Peak,
                0.5 * hour_s as f64 / 3600.0,
            );
            let mut p = HourOfDayPredictor::default();
            for (_, d) in &offline {
                p.learn(d);
            }
            let expected = p.plan(day, &policy());
            assert_eq!(s.plan(day), expected, "day {day}");
        }
        let plan = s.plan(13);
        // Afternoons need all three gears' servers (L ≥ 5 of 9 servers), nights one; hour 2 is
        // maintenance: gear r.
        assert_eq!(plan.gears[14], 3);
        assert_eq!(plan.gears[4], 2);
        assert_eq!(plan.gears[2], 3);
        assert_eq!(plan.rotation, rotation(13, 3));
        assert_eq!(s.gear(13 * 24 + 14), 3);
    }

    /// A server's clock far off (or a forged report) cannot make the MDS measure years of
    /// seconds nor keep reports for the far future.
    #[test]
    fn reports_far_from_the_clock_are_refused() {
        let mut s = Scheduler::new(policy(), server(), 10);
        s.report(0, &reads(100));
        s.close_before(10_000_000);
        assert!(s.hours().count() <= (REPORT_WINDOW_S / 10) as usize + 1);
        assert_eq!(s.refused(), 1);
        s.report(10_000_000 + REPORT_WINDOW_S + 1, &reads(100));
        assert_eq!(s.refused(), 2);
        s.report(10_000_000 + 5, &reads(100));
        assert_eq!(s.refused(), 2);
    }

    #[test]
    fn a_restarted_scheduler_plans_from_the_hours_kept() {
        let hour_s = 2;
        let mut s = Scheduler::new(policy(), server(), hour_s);
        let mut kept = Vec::new();
        for second in 0..3 * 24 * hour_s {
            let n = if (second / hour_s) % 24 < 12 {
                100
            } else {
                900
            };
            s.report(second, &reads(n));
            kept.extend(s.close_before(second));
        }
        kept.extend(s.close_before(3 * 24 * hour_s));
        let mut t = Scheduler::new(policy(), server(), hour_s);
        t.restore(kept);
        assert_eq!(t.plan(3), s.plan(3));
        assert_eq!(t.plan(3).gears[1], 1);
        assert_eq!(t.plan(3).gears[20], 3);
    }

    #[test]
    fn an_hour_measured_in_two_lives_keeps_both_parts() {
        let mut s = Scheduler::new(policy(), server(), 10);
        // Seconds 50–55 of hour 5, kept by an earlier life.
        s.restore([HourLoad {
            hour: 5,
            peak: 4.0,
            mean: 1.0,
            covered_s: 6,
            requests: 400,
            ..HourLoad::default()
        }]);
        s.report(56, &reads(200));
        let ended = s.close_before(61);
        assert_eq!(ended.len(), 1);
        let h = ended[0];
        assert_eq!((h.hour, h.covered_s, h.peak, h.requests), (5, 10, 4.0, 600));
        assert!((h.mean - (6.0 + 2.0) / 10.0).abs() < 1e-12, "{}", h.mean);
    }
}
