//! Figures 8–10 on real load variation: the volumes of recorded trace fragments (the shared
//! UMass, MSR, CloudPhysics and SYSTOR'17 pieces) as request streams, each with its own arrivals, sizes, reads
//! and writes, where Table 2's streams are partly generated ([`super::skew::table2`]).
//!
//! The fragments are far from the paper's traces in length and rate (a 60 s WebSearch minute,
//! TPC-C's 0.14 s at 50,000 requests/s, an MSR volume's 160 hours at 0.02 requests/s). Each file
//! is looped to cover the run, from a phase drawn from the seed, and played as recorded unless
//! it is too busy: the busiest files are slowed to a common cap on their write-weighted load,
//! solved so that all files together carry Table 2's total (the load the paper's arrays
//! carried; [`load_cap`]). No file is played faster than recorded, so no burst is made more
//! intense than it was; the near-idle MSR volumes stay near idle and are dropped like the
//! paper's nine. Within a file, the volumes keep their recorded loads relative to each other; a
//! file with many volumes gives its [`MAX_STREAMS_PER_FILE`] busiest. The speed of every file is
//! stated in the source's description and the JSON.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cordillera_trace::{Format, TimeUnit};
use cordillera_types::rng::SimRng;

use super::skew::{Records, Source, TABLE_2};
use super::streams::{merge, Looped};
use crate::input::TraceInput;
use cordillera_striping::policy;

/// A fragment the experiment looks for, relative to the directory given.
#[derive(Clone, Copy, Debug)]
pub struct Known {
    pub path: &'static str,
    pub format: Option<Format>,
    pub time_unit: Option<TimeUnit>,
    pub label: &'static str,
}

/// The fragments with timestamps and reads/writes (`traces/INVENTORY.md`), in this order. The
/// ARC page references have no times; Tencent's sample has whole-second times (its 50,000
/// requests fall in two ticks, so their arrivals are unknown); MSR's write-only samples are
/// parser fixtures (their first 1,000 writes) and hm_0's 1,000-request chunk is the piece just
/// before the 148 s one.
pub const KNOWN: [Known; 11] = [
    Known {
        path: "umass/umass_websearch_small.mqsim.trace",
        format: Some(Format::Ascii5),
        time_unit: Some(TimeUnit::Ns),
        label: "websearch",
    },
    Known {
        path: "umass/tpcc_small.mqsim.trace",
        format: Some(Format::Ascii5),
        time_unit: Some(TimeUnit::Ns),
        label: "tpcc",
    },
    Known {
        path: "msr/rsrch_1.full.csv",
        format: None,
        time_unit: None,
        label: "rsrch_1",
    },
    Known {
        path: "msr/wdev_1.full.csv",
        format: None,
        time_unit: None,
        label: "wdev_1",
    },
    Known {
        path: "msr/hm_1.writes_subset.csv",
        format: None,
        time_unit: None,
        label: "hm_1",
    },
    Known {
        path: "msr/hm_0.chunk_148s.csv",
        format: None,
        time_unit: None,
        label: "hm_0",
    },
    Known {
        path: "msr/wdev_3.partial.csv",
        format: None,
        time_unit: None,
        label: "wdev_3",
    },
    Known {
        path: "msr_production/msnfs_slice.ms.trace",
        format: Some(Format::Ascii5),
        time_unit: Some(TimeUnit::Ms),
        label: "msnfs",
    },
    Known {
        path: "cloudphysics/cloudphysics_vscsi_sample.csv",
        format: None,
        time_unit: None,
        label: "cloudphysics",
    },
    Known {
        path: "systor17/systor17_vdi_sample1.csv.gz",
        format: None,
        time_unit: None,
        label: "systor1",
    },
    Known {
        path: "systor17/systor17_vdi_sample2.csv.gz",
        format: None,
        time_unit: None,
        label: "systor2",
    },
];

/// Streams one file gives at most: Table 2's largest trace has 24.
pub const MAX_STREAMS_PER_FILE: usize = 24;

/// Table 2's total write-weighted load (reads + 4 × writes per second over its five traces):
/// what the fragments carry together.
pub fn table2_weighted_iops() -> f64 {
    TABLE_2
        .iter()
        .map(|r| policy::weighted_iops(r.read_iops, r.write_iops))
        .sum()
}

/// One file as recorded, and how it is played.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FileInfo {
    pub label: String,
    pub path: PathBuf,
    pub requests: u64,
    /// Recorded span from the first request to the last, plus one mean gap, seconds.
    pub span_s: f64,
    /// Volumes in the file, and those kept as streams (the busiest).
    pub volumes: usize,
    pub streams: Vec<String>,
    /// Write-weighted requests per second of the kept volumes, as recorded.
    pub recorded_weighted_iops: f64,
    /// Recorded seconds per run second: 1, or below when the file is slowed to the load cap
    /// ([`load_cap`]); never faster than recorded.
    pub speed: f64,
    #[serde(skip)]
    input: TraceInput,
    #[serde(skip)]
    origin_ns: i64,
    #[serde(skip)]
    period_ns: i64,
    /// File volume → index among this file's streams.
    #[serde(skip)]
    map: Vec<Option<u32>>,
}

/// The load each file is held to (write-weighted IOPS): files lighter than it play as
/// recorded, heavier ones are slowed to it, and together they carry `total` (all play as
/// recorded, the cap infinite, when even that falls short).
pub fn load_cap(recorded: &[f64], total: f64) -> f64 {
    let mut sorted = recorded.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut below = 0.0;
    for (i, w) in sorted.iter().enumerate() {
        let cap = (total - below) / (sorted.len() - i) as f64;
        if cap <= *w {
            return cap;
        }
        below += w;
    }
    f64::INFINITY
}

/// A speed as the description prints it: two significant digits.
fn speed_text(speed: f64) -> String {
    if speed >= 0.995 {
        return "as recorded".into();
    }
    let digits = (1.0 - speed.log10().floor()).max(2.0) as usize;
    format!("×{speed:.digits$}")
}

/// A positive number with at least two significant digits.
fn significant(x: f64) -> String {
    if x >= 10.0 {
        return format!("{x:.0}");
    }
    let digits = (1.0 - x.log10().floor()).max(1.0) as usize;
    format!("{x:.digits$}")
}

/// The fragments found in a directory, measured once (one pass each).
#[derive(Clone, Debug)]
pub struct Fragments {
    pub dir: PathBuf,
    pub files: Vec<FileInfo>,
    /// Known fragments not in the directory.
    pub missing: Vec<String>,
}

/// The names of a reader's volumes, read once its records have been.
type VolumeNames = Box<dyn Fn() -> Vec<String>>;

/// A file's records and, once they are read, its volumes' names.
fn records(input: &TraceInput) -> Result<(Records, VolumeNames), String> {
    let reader = input
        .open()
        .map_err(|e| format!("{}: {e}", input.file.display()))?;
    let reader = std::rc::Rc::new(std::cell::RefCell::new(reader));
    let file = input.file.display().to_string();
    let r = reader.clone();
    let iter = std::iter::from_fn(move || {
        r.borrow_mut()
            .next_record()
            .map_err(|e| format!("{file}: {e}"))
            .transpose()
    });
    let names = move || {
        reader
            .borrow()
            .volumes()
            .names()
            .map(|(_, n)| n.to_string())
            .collect()
    };
    Ok((Box::new(iter), Box::new(names)))
}

fn measure(known: &Known, path: PathBuf) -> Result<FileInfo, String> {
    let input = TraceInput {
        format: known.format,
        time_unit: known.time_unit,
        ..TraceInput::file(&path)
    };
    let (iter, names) = records(&input)?;
    let (mut first, mut last, mut n) = (None, 0i64, 0u64);
    let mut per_volume: Vec<(u64, u64)> = Vec::new();
    for r in iter {
        let r = r?;
        first.get_or_insert(r.time_ns);
        last = r.time_ns;
        n += 1;
        let v = r.volume.0 as usize;
        if per_volume.len() <= v {
            per_volume.resize(v + 1, (0, 0));
        }
        if r.op.is_write() {
            per_volume[v].1 += 1;
        } else {
            per_volume[v].0 += 1;
        }
    }
    let names = names();
    let Some(first) = first else {
        return Err(format!("{}: no requests", path.display()));
    };
    if n < 100 || last <= first {
        return Err(format!(
            "{}: {n} requests over {} ns, too few to loop",
            path.display(),
            last - first
        ));
    }
    let period_ns = last - first + (last - first) / (n as i64 - 1);
    let weighted = |(reads, writes): (u64, u64)| policy::weighted_iops(reads as f64, writes as f64);
    let mut order: Vec<usize> = (0..per_volume.len()).collect();
    order.sort_by(|&a, &b| weighted(per_volume[b]).total_cmp(&weighted(per_volume[a])));
    order.truncate(MAX_STREAMS_PER_FILE);
    order.retain(|&v| per_volume[v] != (0, 0));
    order.sort_unstable();
    let mut map = vec![None; per_volume.len()];
    let mut streams = Vec::new();
    for (i, &v) in order.iter().enumerate() {
        map[v] = Some(i as u32);
        let name = names.get(v).cloned().unwrap_or_else(|| v.to_string());
        streams.push(format!("{}/{name}", known.label));
    }
    let kept: f64 = order.iter().map(|&v| weighted(per_volume[v])).sum();
    let span_s = period_ns as f64 / 1e9;
    Ok(FileInfo {
        label: known.label.to_string(),
        path,
        requests: n,
        span_s,
        volumes: per_volume.len(),
        streams,
        recorded_weighted_iops: kept / span_s,
        speed: 1.0,
        input,
        origin_ns: first,
        period_ns,
        map,
    })
}

impl Fragments {
    /// Finds and measures the known fragments under `dir`; an error when none is there or one
    /// cannot be read.
    pub fn scan(dir: &Path) -> Result<Fragments, String> {
        if !dir.is_dir() {
            return Err(format!("{}: not a directory", dir.display()));
        }
        let (mut files, mut missing) = (Vec::new(), Vec::new());
        for known in &KNOWN {
            let path = dir.join(known.path);
            if !path.exists() {
                missing.push(known.path.to_string());
                continue;
            }
            files.push(measure(known, path)?);
        }
        if files.is_empty() {
            return Err(format!(
                "{}: none of the known fragments ({}) is there",
                dir.display(),
                KNOWN.map(|k| k.path).join(", ")
            ));
        }
        let cap = load_cap(
            &files
                .iter()
                .map(|f| f.recorded_weighted_iops)
                .collect::<Vec<_>>(),
            table2_weighted_iops(),
        );
        for f in &mut files {
            f.speed = (cap / f.recorded_weighted_iops).min(1.0);
        }
        Ok(Fragments {
            dir: dir.to_path_buf(),
            files,
            missing,
        })
    }

    /// The streams for one seed: each file looped at its speed from a phase drawn from `seed`.
    pub fn source(&self, duration_s: f64, seed: u64) -> Source {
        let mut names = Vec::new();
        let mut firsts = Vec::new();
        for f in &self.files {
            firsts.push(names.len() as u32);
            names.extend(f.streams.iter().cloned());
        }
        let description = format!(
            "the recorded fragments in {} (each volume a stream, at most {MAX_STREAMS_PER_FILE} per file; each file looped from a seeded phase, slowed where needed so that none carries more than {:.0} write-weighted IOPS and together they carry Table 2's {:.0}: {})",
            self.dir.display(),
            self.files
                .iter()
                .map(|f| f.recorded_weighted_iops * f.speed)
                .fold(0.0, f64::max),
            table2_weighted_iops(),
            self.files
                .iter()
                .map(|f| format!("{} {} s {}", f.label, significant(f.span_s), speed_text(f.speed)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let files = self.files.clone();
        let end_ns = (duration_s * 1e9) as i64;
        let open = Arc::new(move || -> Result<Records, String> {
            let mut parts: Vec<Records> = Vec::new();
            for (i, f) in files.iter().enumerate() {
                let mut phase = SimRng::new(seed, 7_000 + 2 * i as u64);
                let input = f.input.clone();
                let open = Arc::new(move || records(&input).map(|(r, _)| r));
                let map = f.map.iter().map(|m| m.map(|s| s + firsts[i])).collect();
                let thinning = SimRng::new(seed, 7_001 + 2 * i as u64);
                let mut looped = Looped::new(open, f.period_ns, map, end_ns, thinning);
                looped.origin_ns = f.origin_ns;
                looped.speed = f.speed;
                looped.phase_ns = phase.below(f.period_ns as u64) as i64;
                parts.push(Box::new(looped));
            }
            Ok(merge(parts))
        });
        Source {
            names,
            open,
            description,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_trace::{Record, VolumeId};
    use cordillera_types::Op;

    #[test]
    fn the_load_cap_slows_only_the_busiest_files_and_the_total_is_kept() {
        let recorded = [0.1, 50.0, 400.0, 1000.0, 90_000.0];
        let cap = load_cap(&recorded, 1362.6);
        let carried: f64 = recorded.iter().map(|w| w.min(cap)).sum();
        assert!((carried - 1362.6).abs() < 1e-6, "{cap} carries {carried}");
        assert!(cap > 400.0 && cap < 1000.0, "{cap}");
        // Too little recorded load: everything as recorded.
        assert_eq!(load_cap(&[1.0, 2.0], 100.0), f64::INFINITY);
        assert_eq!(speed_text(1.0), "as recorded");
        assert_eq!(speed_text(0.0019), "×0.0019");
        assert_eq!(speed_text(0.5), "×0.50");
    }

    /// A fragment of 100 requests, 10 ms apart from t = 5 s, on volumes 0 and 1, played at half
    /// speed from the middle: run times count from the phase, doubled, and loop.
    #[test]
    fn a_slowed_fragment_loops_from_its_phase() {
        let records: Arc<Vec<Record>> = Arc::new(
            (0..100)
                .map(|i| Record {
                    time_ns: 5_000_000_000 + i * 10_000_000,
                    volume: VolumeId((i % 2) as u32),
                    op: Op::Read,
                    offset_bytes: 0,
                    length_bytes: 4096,
                    response_ns: None,
                })
                .collect(),
        );
        let open = Arc::new(move || {
            let r = records.clone();
            Ok(Box::new((0..r.len()).map(move |i| Ok(r[i]))) as Records)
        });
        let mut looped = Looped::new(
            open,
            1_000_000_000,
            vec![None, Some(7)],
            3_000_000_000,
            SimRng::new(1, 1),
        );
        looped.origin_ns = 5_000_000_000;
        looped.phase_ns = 500_000_000;
        looped.speed = 0.5;
        let got: Vec<Record> = looped.map(Result::unwrap).collect();
        // Odd requests only (volume 1 → stream 7), from the 51st: 0, 20, 40, … ms of run time.
        assert_eq!(got[0].time_ns, 20_000_000);
        assert!(got.iter().all(|r| r.volume == VolumeId(7)));
        // The first pass ends at 1 s of run time; the second starts there.
        let second = got.iter().position(|r| r.time_ns >= 1_000_000_000).unwrap();
        assert_eq!(got[second].time_ns, 1_020_000_000);
        assert!(got.windows(2).all(|w| w[0].time_ns < w[1].time_ns));
        assert!(got.last().unwrap().time_ns < 3_000_000_000);
        // 25 in the first (half) pass over 1 s of run time, 50 in the second over 2 s; the
        // third would start at the run's end.
        assert_eq!(got.len(), 25 + 50, "{}", got.len());
    }
}
