//! Poisson ON-OFF request streams with exponential sizes (striping paper §3.1).

use super::*;

/// One Poisson ON-OFF request stream: during ON periods requests arrive at `rate_on_per_s` with
/// exponentially distributed sizes of mean `mean_request_bytes`, at random locations.
#[derive(Clone, Debug)]
pub struct Stream {
    pub rate_on_per_s: f64,
    pub mean_request_bytes: f64,
    pub read_fraction: f64,
}

impl Stream {
    /// The striping paper's large-request stream: 2 MB mean.
    pub fn large(rate_on_per_s: f64) -> Stream {
        Stream {
            rate_on_per_s,
            mean_request_bytes: 2e6,
            read_fraction: 1.0,
        }
    }
    /// The striping paper's small-request stream: 64 KB mean.
    pub fn small(rate_on_per_s: f64) -> Stream {
        Stream {
            rate_on_per_s,
            mean_request_bytes: 64e3,
            read_fraction: 1.0,
        }
    }
}

/// Pairs of ON-OFF streams (volumes `2i` and `2i + 1`). Each pair shares a cycle of an ON period
/// of mean `mean_on_s` (exponential) and an OFF period of the same length; the second stream's
/// ON period is shifted by `(1 − correlation) / 2` of the ON length, so correlation 1 means
/// synchronized ON periods, 0 half overlap and −1 mutually exclusive ones.
///
/// Across pairs (`cross_correlation` in [0, 1]): at 0 each pair draws its own cycles; above,
/// every pair follows the same cycles, pair p shifted by `(1 − cross) · u_p` of a mean cycle
/// (u_p uniform in [0, 1) per pair), so 1 synchronizes the pairs (L_i with L_j, S_i with S_j,
/// the striping paper's §3.3).
#[derive(Clone, Debug)]
pub struct OnOff {
    pub pairs: Vec<(Stream, Stream, f64)>,
    pub mean_on_s: f64,
    pub duration_s: f64,
    pub span_bytes: u64,
    pub seed: u64,
    pub cross_correlation: f64,
}

impl OnOff {
    pub fn volume_names(&self) -> Vec<String> {
        (0..self.pairs.len() * 2)
            .map(|v| format!("stream_{v}"))
            .collect()
    }

    /// The ON intervals (ns) of each stream.
    pub fn on_periods(&self) -> Vec<Vec<(f64, f64)>> {
        let mut out = Vec::new();
        let cross = self.cross_correlation;
        assert!((0.0..=1.0).contains(&cross), "cross correlation in [0, 1]");
        for (p, (_, _, correlation)) in self.pairs.iter().enumerate() {
            assert!((-1.0..=1.0).contains(correlation), "correlation in [-1, 1]");
            let shared = cross > 0.0;
            let mut rng = SimRng::new(self.seed, if shared { 100 } else { 100 + p as u64 });
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let end = self.duration_s * 1e9;
            let mut t = rng.unit() * self.mean_on_s * 1e9;
            if shared {
                let u = SimRng::new(self.seed, 200 + p as u64).unit();
                t += (1.0 - cross) * u * 2.0 * self.mean_on_s * 1e9;
            }
            while t < end {
                let on = rng.exponential(self.mean_on_s * 1e9);
                let shift = (1.0 - correlation) / 2.0 * on;
                a.push((t, (t + on).min(end)));
                if t + shift < end {
                    b.push((t + shift, (t + shift + on).min(end)));
                }
                t += 2.0 * on;
            }
            out.push(a);
            out.push(b);
        }
        out
    }

    pub fn records(&self) -> impl Iterator<Item = Record> {
        let periods = self.on_periods();
        let streams: Vec<Stream> = self
            .pairs
            .iter()
            .flat_map(|(a, b, _)| [a.clone(), b.clone()])
            .collect();
        let span = self.span_bytes;
        let seed = self.seed;
        // One lazily advanced cursor per stream; the merge takes the earliest next arrival.
        let mut cursors: Vec<StreamCursor> = streams
            .into_iter()
            .zip(periods)
            .enumerate()
            .map(|(v, (stream, periods))| {
                StreamCursor::new(v as u32, stream, periods, SimRng::new(seed, v as u64))
            })
            .collect();
        std::iter::from_fn(move || {
            let next = cursors
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.next_time().map(|t| (t, i)))
                .min_by(|a, b| a.0.total_cmp(&b.0))?;
            cursors[next.1].take(span)
        })
    }
}

pub(super) struct StreamCursor {
    volume: u32,
    stream: Stream,
    periods: Vec<(f64, f64)>,
    period: usize,
    next: Option<f64>,
    rng: SimRng,
}

impl StreamCursor {
    fn new(volume: u32, stream: Stream, periods: Vec<(f64, f64)>, rng: SimRng) -> StreamCursor {
        let mut c = StreamCursor {
            volume,
            stream,
            periods,
            period: 0,
            next: None,
            rng,
        };
        c.next = c.periods.first().map(|p| p.0);
        c.advance();
        c
    }

    /// Moves `next` to the next arrival at or after it, inside an ON period.
    fn advance(&mut self) {
        while let Some(t) = self.next {
            let Some(&(start, end)) = self.periods.get(self.period) else {
                self.next = None;
                return;
            };
            let candidate = t.max(start) + self.rng.exponential(1e9 / self.stream.rate_on_per_s);
            if candidate < end {
                self.next = Some(candidate);
                return;
            }
            self.period += 1;
            self.next = self.periods.get(self.period).map(|p| p.0);
        }
    }

    fn next_time(&self) -> Option<f64> {
        self.next
    }

    fn take(&mut self, span: u64) -> Option<Record> {
        let t = self.next?;
        let size = ((self.rng.exponential(self.stream.mean_request_bytes) / 512.0)
            .ceil()
            .max(1.0) as u64
            * 512)
            .min(span);
        let offset = self.rng.below((span - size) / 512 + 1) * 512;
        let op = if self.rng.chance(self.stream.read_fraction) {
            Op::Read
        } else {
            Op::Write
        };
        let record = Record {
            time_ns: t as i64,
            volume: VolumeId(self.volume),
            op,
            offset_bytes: offset,
            length_bytes: size,
            response_ns: None,
        };
        // The next arrival starts from this one.
        self.next = Some(t);
        self.advance();
        Some(record)
    }
}
