//! Several seeds of one lab: each run reduced to its headline figures, then the figures' mean,
//! minimum and maximum over the runs, beside the paper's value.
//!
//! A figure is named by a key that is the same in every run of one configuration (say
//! `testbed/up-shift/sierra/p99_ms`); a figure a run lacks (an experiment that found no window)
//! is left out of that key's spread, and the row says over how many seeds it was taken.

use serde::Serialize;

/// One headline figure of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figure {
    pub key: String,
    /// What it is, for a person.
    pub label: String,
    pub unit: &'static str,
    pub value: f64,
    /// The paper's value as the paper states it ("" when it gives none).
    pub paper: String,
}

impl Figure {
    pub fn new(
        key: impl Into<String>,
        label: impl Into<String>,
        unit: &'static str,
        value: f64,
        paper: impl Into<String>,
    ) -> Figure {
        Figure {
            key: key.into(),
            label: label.into(),
            unit,
            value,
            paper: paper.into(),
        }
    }
}

/// One figure over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub key: String,
    pub label: String,
    pub unit: &'static str,
    pub paper: String,
    /// The seeds whose run has this figure, in run order, and their values.
    pub seeds: Vec<u64>,
    pub values: Vec<f64>,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Sample standard deviation (0 for one value).
    pub std_dev: f64,
}

/// The spread of every figure over `runs` (seed, its figures), in the order figures first
/// appear. Values that are not finite (a ratio over nothing) are left out.
pub fn spread(runs: &[(u64, Vec<Figure>)]) -> Vec<Spread> {
    let mut rows: Vec<Spread> = Vec::new();
    for (seed, figures) in runs {
        for f in figures {
            if !f.value.is_finite() {
                continue;
            }
            let row = match rows.iter_mut().position(|r| r.key == f.key) {
                Some(i) => &mut rows[i],
                None => {
                    rows.push(Spread {
                        key: f.key.clone(),
                        label: f.label.clone(),
                        unit: f.unit,
                        paper: f.paper.clone(),
                        seeds: Vec::new(),
                        values: Vec::new(),
                        mean: 0.0,
                        min: 0.0,
                        max: 0.0,
                        std_dev: 0.0,
                    });
                    rows.last_mut().expect("just pushed")
                }
            };
            row.seeds.push(*seed);
            row.values.push(f.value);
        }
    }
    for row in &mut rows {
        let n = row.values.len() as f64;
        row.mean = row.values.iter().sum::<f64>() / n;
        row.min = row.values.iter().copied().fold(f64::INFINITY, f64::min);
        row.max = row.values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        row.std_dev = if row.values.len() < 2 {
            0.0
        } else {
            (row.values
                .iter()
                .map(|v| (v - row.mean).powi(2))
                .sum::<f64>()
                / (n - 1.0))
                .sqrt()
        };
    }
    rows
}

/// A number with as many decimals as its size calls for.
pub fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// The spread as a terminal table: figure, mean, min – max, sd, seeds, paper.
pub fn table(rows: &[Spread], runs: usize) -> String {
    use std::fmt::Write as _;
    let width = rows
        .iter()
        .map(|r| r.label.len())
        .max()
        .unwrap_or(10)
        .max(6);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}  {:>10}  {:>23}  {:>9}  {:>5}  {:<6}  paper",
        "figure", "mean", "min – max", "sd", "seeds", "unit"
    );
    for r in rows {
        let seeds = if r.values.len() == runs {
            format!("{}", r.values.len())
        } else {
            format!("{}/{runs}", r.values.len())
        };
        let _ = writeln!(
            out,
            "{:<width$}  {:>10}  {:>23}  {:>9}  {:>5}  {:<6}  {}",
            r.label,
            number(r.mean),
            format!("{} – {}", number(r.min), number(r.max)),
            number(r.std_dev),
            seeds,
            r.unit,
            r.paper
        );
    }
    out
}

/// The spread as CSV (the csv crate's quoting): one row per figure, then its values by seed.
pub fn csv(rows: &[Spread]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let header = [
        "key", "label", "unit", "mean", "min", "max", "std_dev", "seeds", "values", "paper",
    ];
    let mut lines = vec![header.map(String::from).to_vec()];
    for r in rows {
        let values: Vec<String> = r.values.iter().map(|v| format!("{v}")).collect();
        let seeds: Vec<String> = r.seeds.iter().map(|s| s.to_string()).collect();
        lines.push(vec![
            r.key.clone(),
            r.label.clone(),
            r.unit.to_string(),
            r.mean.to_string(),
            r.min.to_string(),
            r.max.to_string(),
            r.std_dev.to_string(),
            seeds.join(" "),
            values.join(" "),
            r.paper.clone(),
        ]);
    }
    for line in lines {
        w.write_record(&line).expect("writing to memory");
    }
    String::from_utf8(w.into_inner().expect("writing to memory")).expect("UTF-8 fields")
}

/// Runs `run` once per seed on up to `threads` threads, and returns the results in seed order
/// (each seed's run is independent; the seeds are taken in order as threads come free).
pub fn per_seed<T: Send>(seeds: &[u64], threads: usize, run: &(dyn Fn(u64) -> T + Sync)) -> Vec<T> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<T>>> =
        seeds.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, seeds.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { break };
                *slots[i].lock().expect("a seed's slot") = Some(run(seed));
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .expect("a seed's slot")
                .expect("every seed ran")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_gathered_by_key_over_the_seeds_that_have_them() {
        let runs = vec![
            (
                1,
                vec![
                    Figure::new("a", "A", "ms", 2.0, "3"),
                    Figure::new("b", "B", "%", 10.0, ""),
                ],
            ),
            (
                2,
                vec![
                    Figure::new("a", "A", "ms", 4.0, "3"),
                    Figure::new("c", "C", "x", f64::NAN, ""),
                ],
            ),
            (3, vec![Figure::new("a", "A", "ms", 6.0, "3")]),
        ];
        let rows = spread(&runs);
        assert_eq!(rows.len(), 2, "the NaN-only figure is left out");
        let a = &rows[0];
        assert_eq!((a.mean, a.min, a.max), (4.0, 2.0, 6.0));
        assert_eq!(a.seeds, vec![1, 2, 3]);
        assert!((a.std_dev - 2.0).abs() < 1e-12);
        assert_eq!(rows[1].seeds, vec![1]);
        assert_eq!(rows[1].std_dev, 0.0);
        let text = table(&rows, 3);
        assert!(text.contains("1/3"), "{text}");
        let csv = csv(&rows);
        assert_eq!(csv.lines().count(), 3);
        assert!(csv.contains("a,A,ms,4,2,6,2,1 2 3,2 4 6,3"), "{csv}");
    }

    #[test]
    fn a_label_with_a_comma_is_quoted() {
        let rows = spread(&[(1, vec![Figure::new("k", "x, y", "", 1.0, "77 of 254,536")])]);
        let csv = csv(&rows);
        let line = csv.lines().nth(1).unwrap();
        assert!(line.starts_with("k,\"x, y\","), "{line}");
        assert!(line.ends_with(",\"77 of 254,536\""), "{line}");
    }
}
