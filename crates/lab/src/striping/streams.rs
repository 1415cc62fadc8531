//! Record streams for Figures 8–10: a recorded fragment looped from a phase, at a speed,
//! thinned and with its volumes renumbered ([`Looped`]), and time-ordered streams merged into
//! one ([`merge`]) — what [`super::skew::table2`] and [`super::fragments`] build their sources
//! from.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use cordillera_trace::{Record, VolumeId as TraceVolume};
use cordillera_types::rng::SimRng;

use super::skew::Records;

/// A recorded fragment played in a loop from phase `phase_ns`, `speed` times as fast as
/// recorded, each request kept with probability `keep`, its volume `v` becoming stream
/// `map[v]` (dropped when `None` or beyond `map`). Times are the fragment's less `origin_ns`.
pub(crate) struct Looped {
    pub open: Arc<dyn Fn() -> Result<Records, String> + Send + Sync>,
    pub current: Option<Records>,
    /// The fragment's first time (its times count from here).
    pub origin_ns: i64,
    /// The fragment's length, in its own time.
    pub period_ns: i64,
    /// Where the first pass starts, in the fragment's own time.
    pub phase_ns: i64,
    /// Fragment seconds per run second.
    pub speed: f64,
    /// Added to the fragment's times in the current pass.
    pub shift_ns: i64,
    pub first_pass: bool,
    pub keep: f64,
    pub rng: SimRng,
    pub map: Vec<Option<u32>>,
    /// The run's end, in run time.
    pub end_ns: i64,
}

impl Looped {
    /// A fragment played from the start of its pass at `phase_ns`.
    pub fn new(
        open: Arc<dyn Fn() -> Result<Records, String> + Send + Sync>,
        period_ns: i64,
        map: Vec<Option<u32>>,
        end_ns: i64,
        rng: SimRng,
    ) -> Looped {
        Looped {
            open,
            current: None,
            origin_ns: 0,
            period_ns,
            phase_ns: 0,
            speed: 1.0,
            shift_ns: 0,
            first_pass: true,
            keep: 1.0,
            rng,
            map,
            end_ns,
        }
    }

    fn run_time(&self, fragment_ns: i64) -> i64 {
        ((fragment_ns - self.origin_ns + self.shift_ns - self.phase_ns) as f64 / self.speed) as i64
    }
}

impl Iterator for Looped {
    type Item = Result<Record, String>;
    fn next(&mut self) -> Option<Result<Record, String>> {
        loop {
            if self.current.is_none() {
                match (self.open)() {
                    Ok(r) => self.current = Some(r),
                    Err(e) => return Some(Err(e)),
                }
            }
            let next = self.current.as_mut().expect("opened").next();
            match next {
                None => {
                    self.current = None;
                    self.shift_ns += self.period_ns;
                    self.first_pass = false;
                    if self.run_time(self.origin_ns) >= self.end_ns {
                        return None;
                    }
                }
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok(mut r)) => {
                    if self.first_pass && r.time_ns - self.origin_ns < self.phase_ns {
                        continue;
                    }
                    let t = self.run_time(r.time_ns);
                    if t >= self.end_ns {
                        return None;
                    }
                    let stream = self.map.get(r.volume.0 as usize).copied().flatten();
                    let Some(stream) = stream else { continue };
                    if self.keep < 1.0 && !self.rng.chance(self.keep) {
                        continue;
                    }
                    r.time_ns = t;
                    r.volume = TraceVolume(stream);
                    return Some(Ok(r));
                }
            }
        }
    }
}

/// Merges time-ordered record streams into one.
pub fn merge(sources: Vec<Records>) -> Records {
    struct Merge {
        sources: Vec<Records>,
        heads: BinaryHeap<Reverse<(i64, usize, u64)>>,
        pending: Vec<Option<Record>>,
        sequence: u64,
        error: Option<String>,
    }
    impl Iterator for Merge {
        type Item = Result<Record, String>;
        fn next(&mut self) -> Option<Result<Record, String>> {
            if let Some(e) = self.error.take() {
                return Some(Err(e));
            }
            let Reverse((_, i, _)) = self.heads.pop()?;
            let record = self.pending[i].take().expect("a head per pending record");
            match self.sources[i].next() {
                Some(Ok(r)) => {
                    self.sequence += 1;
                    self.heads.push(Reverse((r.time_ns, i, self.sequence)));
                    self.pending[i] = Some(r);
                }
                Some(Err(e)) => self.error = Some(e),
                None => {}
            }
            Some(Ok(record))
        }
    }
    let mut m = Merge {
        pending: vec![None; sources.len()],
        sources,
        heads: BinaryHeap::new(),
        sequence: 0,
        error: None,
    };
    for i in 0..m.sources.len() {
        match m.sources[i].next() {
            Some(Ok(r)) => {
                m.heads.push(Reverse((r.time_ns, i, 0)));
                m.pending[i] = Some(r);
            }
            Some(Err(e)) => m.error = Some(e),
            None => {}
        }
    }
    Box::new(m)
}
