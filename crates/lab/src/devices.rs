//! The user's device: the kinds a verdict can be judged on (each a calibrated preset of
//! `cordillera_models::presets`, with its source), one or an array of them, and which one a trace's
//! recorded response times fit.
//!
//! Fitting replays the trace's first requests open-loop ([`cordillera_sim::replay`]) on one device
//! of each kind and keeps the kind whose simulated mean response is closest (as a ratio) to the
//! mean the trace recorded. It tells a flash device from a disk and a fast disk from a slow one;
//! it does not see arrays, caches or the host's queueing, and says so.

use cordillera_models::device::raid::RaidLevel;
use cordillera_models::device::Device;
use cordillera_models::presets::{self, ArraySpec};
use cordillera_trace::Record;
use serde::Serialize;

/// One kind of device a user may have.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    /// `--device` name.
    pub name: &'static str,
    /// The calibrated model preset it is.
    pub preset: &'static str,
    pub what: &'static str,
    /// Where the model's figures come from (calibration: docs/SIMULATION.md).
    pub source: &'static str,
}

/// Every kind `--device` accepts (a model preset's own name is accepted too).
pub const KINDS: [Kind; 5] = [
    Kind {
        name: "hdd-7200",
        preset: "sata-7200",
        what: "7,200 RPM SATA disk",
        source: "500 GB SATA disk of Bonfire's testbed; 8.5 ms average seek, 100 MB/s",
    },
    Kind {
        name: "hdd-10k",
        preset: "fujitsu-maj3182mc",
        what: "10,000 RPM SCSI disk",
        source: "Fujitsu MAJ3182MC, the striping paper's Table 1; 4.7 ms average seek, 39 MB/s",
    },
    Kind {
        name: "hdd-15k",
        preset: "cheetah-15k",
        what: "15,000 RPM SAS disk",
        source: "Seagate Cheetah 15K of Everest's testbed; 3.5 ms average seek, 90 MB/s",
    },
    Kind {
        name: "sata-ssd",
        preset: "ssd",
        what: "SATA SSD",
        source: "a datasheet class: ~500 MB/s reads, ~300 MB/s writes, 100 µs reads",
    },
    Kind {
        name: "nvme",
        preset: "nvme",
        what: "NVMe SSD",
        source: "a datasheet class: ~3.2 GB/s reads, ~2 GB/s writes, 80 µs reads",
    },
];

/// A device a verdict is judged on: a kind, alone or in an array.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    pub kind: Kind,
    pub array: Option<ArraySpec>,
}

impl PartialEq for Kind {
    fn eq(&self, other: &Kind) -> bool {
        self.name == other.name
    }
}

/// `raid5:5:64k`.
pub fn array_text(a: &ArraySpec) -> String {
    let level = match a.level {
        RaidLevel::Raid0 => "raid0",
        RaidLevel::Raid1 => "raid1",
        RaidLevel::Raid10 => "raid10",
        RaidLevel::Raid5 => "raid5",
    };
    format!("{level}:{}:{}k", a.disks, a.stripe_unit_bytes / 1024)
}

impl DeviceSpec {
    /// `--device NAME` (a kind or a model preset) with `--array LEVEL:DISKS[:UNIT]`.
    pub fn parse(name: &str, array: Option<&str>) -> Result<DeviceSpec, String> {
        let kind = KINDS
            .iter()
            .find(|k| k.name == name || k.preset == name)
            .copied()
            .ok_or_else(|| {
                let names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
                format!("unknown device {name:?}; one of {}", names.join(", "))
            })?;
        let array = array.map(str::parse::<ArraySpec>).transpose()?;
        let spec = DeviceSpec { kind, array };
        spec.build()?;
        Ok(spec)
    }

    /// Everest's testbed volume: a RAID-0 of four 15K-RPM disks.
    pub fn testbed() -> DeviceSpec {
        DeviceSpec::parse("hdd-15k", Some("raid0:4")).expect("the testbed parses")
    }

    pub fn build(&self) -> Result<Box<dyn Device>, String> {
        presets::build(self.kind.preset, self.array)
    }

    /// "a RAID-0 of 4 × 15,000 RPM SAS disk (hdd-15k)".
    pub fn describe(&self) -> String {
        match &self.array {
            None => format!("one {} ({})", self.kind.what, self.kind.name),
            Some(a) => format!(
                "a {} of {} × {} ({})",
                match a.level {
                    RaidLevel::Raid0 => "RAID-0",
                    RaidLevel::Raid1 => "RAID-1",
                    RaidLevel::Raid10 => "RAID-10",
                    RaidLevel::Raid5 => "RAID-5",
                },
                a.disks,
                self.kind.what,
                self.kind.name
            ),
        }
    }

    /// The flags that name it on a `lab` command line (`--array none`: one device).
    pub fn flags(&self) -> String {
        match &self.array {
            None => format!("--device {} --array none", self.kind.name),
            Some(a) => format!("--device {} --array {}", self.kind.name, array_text(a)),
        }
    }
}

/// How the device was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Chosen {
    /// `--device`.
    Given,
    /// From the trace's recorded response times.
    Fitted,
    /// The trace records none: Everest's testbed, named on every verdict.
    Assumed,
}

/// One kind's simulated response to the trace's first requests beside the recorded one.
#[derive(Clone, Debug, Serialize)]
pub struct FitRow {
    pub device: String,
    pub simulated_mean_ms: f64,
    /// Simulated over recorded mean (1 is a perfect fit).
    pub ratio: f64,
}

/// Response times, recorded or simulated, of the same requests.
#[derive(Clone, Debug, Serialize)]
pub struct Latencies {
    pub requests: u64,
    pub read_mean_ms: Option<f64>,
    pub read_p50_ms: Option<f64>,
    pub write_mean_ms: Option<f64>,
    pub write_p50_ms: Option<f64>,
}

/// The device the verdicts are judged on, how it was chosen, and recorded against simulated
/// latency on the trace's first requests.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceChoice {
    #[serde(skip)]
    pub spec: DeviceSpec,
    pub device: String,
    pub array: Option<String>,
    pub description: String,
    pub source: &'static str,
    pub chosen: Chosen,
    pub reason: String,
    /// Each kind against the recorded latency (fitted only).
    pub fit: Vec<FitRow>,
    /// The trace's recorded response times on its first requests, and the same requests
    /// replayed open-loop on the device chosen (absent when the trace records none).
    pub recorded: Option<Latencies>,
    pub simulated: Option<Latencies>,
}

/// Requests of the trace's beginning the fit and the latency comparison replay.
pub const SAMPLE_REQUESTS: usize = 20_000;

fn summary(r: &cordillera_sim::replay::ReplayReport, recorded: bool) -> Latencies {
    let (reads, writes) = if recorded {
        (r.recorded_reads.clone(), r.recorded_writes.clone())
    } else {
        (Some(r.reads.clone()), Some(r.writes.clone()))
    };
    Latencies {
        requests: reads.as_ref().map_or(0, |x| x.count) + writes.as_ref().map_or(0, |x| x.count),
        read_mean_ms: reads.as_ref().and_then(|x| x.mean_ms),
        read_p50_ms: reads.as_ref().and_then(|x| x.p50_ms),
        write_mean_ms: writes.as_ref().and_then(|x| x.mean_ms),
        write_p50_ms: writes.as_ref().and_then(|x| x.p50_ms),
    }
}

/// The mean over reads and writes.
fn mean_ms(l: &Latencies, r: &cordillera_sim::replay::ReplayReport, recorded: bool) -> Option<f64> {
    let (reads, writes) = if recorded {
        (
            r.recorded_reads.as_ref().map_or(0, |x| x.count),
            r.recorded_writes.as_ref().map_or(0, |x| x.count),
        )
    } else {
        (r.reads.count, r.writes.count)
    };
    let total = reads + writes;
    (total > 0).then(|| {
        (l.read_mean_ms.unwrap_or(0.0) * reads as f64
            + l.write_mean_ms.unwrap_or(0.0) * writes as f64)
            / total as f64
    })
}

fn replay(
    spec: &DeviceSpec,
    sample: &[Record],
) -> Result<cordillera_sim::replay::ReplayReport, String> {
    let mut device = spec.build()?;
    Ok(cordillera_sim::replay::replay(
        sample.iter().copied(),
        device.as_mut(),
        1_000_000_000,
    ))
}

/// Chooses the device: `given`, else the kind the sample's recorded response times fit, else
/// the testbed (assumed). `sample`: the trace's first requests.
pub fn choose(given: Option<DeviceSpec>, sample: &[Record]) -> DeviceChoice {
    let recorded = sample.iter().filter(|r| r.response_ns.is_some()).count();
    let (spec, chosen, reason, fit) = match given {
        Some(spec) => (spec, Chosen::Given, "given (--device)".to_owned(), Vec::new()),
        None if recorded >= 100 => match fit(sample) {
            Ok((spec, rows, reason)) => (spec, Chosen::Fitted, reason, rows),
            Err(e) => (DeviceSpec::testbed(), Chosen::Assumed, format!("the fit failed ({e}): assuming Everest's testbed"), Vec::new()),
        },
        None => (
            DeviceSpec::testbed(),
            Chosen::Assumed,
            format!(
                "the trace records {} response time(s) in its first {} requests, too few to fit a device: assuming Everest's testbed; pass --device (and --array) to judge on yours",
                recorded,
                sample.len()
            ),
            Vec::new(),
        ),
    };
    // Recorded against simulated on the same requests (all volumes on one device of the kind
    // chosen); without recorded times there is nothing to set the simulation against.
    let (mut rec, mut sim) = (None, None);
    if recorded > 0 {
        if let Ok(r) = replay(&spec, sample) {
            rec = Some(summary(&r, true));
            sim = Some(summary(&r, false));
        }
    }
    DeviceChoice {
        device: spec.kind.name.to_owned(),
        array: spec.array.as_ref().map(array_text),
        description: spec.describe(),
        source: spec.kind.source,
        spec,
        chosen,
        reason,
        fit,
        recorded: rec,
        simulated: sim,
    }
}

/// The kind whose simulated mean response on the sample is closest to the recorded mean.
fn fit(sample: &[Record]) -> Result<(DeviceSpec, Vec<FitRow>, String), String> {
    let mut rows = Vec::new();
    let mut best: Option<(f64, DeviceSpec)> = None;
    let mut recorded_mean = None;
    for kind in KINDS {
        let spec = DeviceSpec { kind, array: None };
        let r = replay(&spec, sample)?;
        let rec = summary(&r, true);
        let Some(want) = mean_ms(&rec, &r, true).filter(|m| *m > 0.0) else {
            return Err("no recorded response time above 0".into());
        };
        recorded_mean = Some(want);
        let sim = summary(&r, false);
        let got = mean_ms(&sim, &r, false).unwrap_or(0.0).max(1e-6);
        let ratio = got / want;
        rows.push(FitRow {
            device: kind.name.to_owned(),
            simulated_mean_ms: got,
            ratio,
        });
        let distance = ratio.ln().abs();
        if best.as_ref().is_none_or(|(d, _)| distance < *d) {
            best = Some((distance, spec));
        }
    }
    let (distance, spec) = best.ok_or("no device kinds")?;
    let reason = format!(
        "fitted: the trace's first {} requests recorded a mean response of {:.3} ms; replayed on one device of each kind, {} comes closest ({:.2}× the recorded mean); a fit sees one device, not the array, cache or host queue the trace went through",
        sample.len(),
        recorded_mean.unwrap_or(0.0),
        spec.kind.name,
        distance.exp(),
    );
    Ok((spec, rows, reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_trace::VolumeId;
    use cordillera_types::Op;

    fn sample(response_ms: f64) -> Vec<Record> {
        (0..2000u64)
            .map(|i| Record {
                time_ns: i as i64 * 20_000_000,
                volume: VolumeId(0),
                op: if i % 3 == 0 { Op::Write } else { Op::Read },
                offset_bytes: (i * 7919 % 100_000) * 65536,
                length_bytes: 8192,
                response_ns: Some((response_ms * 1e6) as u64),
            })
            .collect()
    }

    #[test]
    fn recorded_response_times_pick_the_device_kind() {
        // Random 8 KiB requests 20 ms apart: a disk answers in milliseconds, flash in 0.1 ms.
        let flash = choose(None, &sample(0.1));
        assert_eq!(flash.chosen, Chosen::Fitted);
        assert!(
            matches!(flash.device.as_str(), "sata-ssd" | "nvme"),
            "{flash:?}"
        );
        for ms in [3.0, 14.0] {
            let disk = choose(None, &sample(ms));
            assert!(disk.device.starts_with("hdd-"), "{disk:?}");
            // The kind kept is the closest of the rows.
            let closest = disk
                .fit
                .iter()
                .min_by(|a, b| a.ratio.ln().abs().total_cmp(&b.ratio.ln().abs()))
                .unwrap();
            assert_eq!(closest.device, disk.device);
            assert_eq!(disk.fit.len(), KINDS.len());
        }
        // Without response times: assumed, and said.
        let mut none = sample(1.0);
        none.iter_mut().for_each(|r| r.response_ns = None);
        let c = choose(None, &none);
        assert_eq!((c.chosen, c.device.as_str()), (Chosen::Assumed, "hdd-15k"));
        assert!(c.reason.contains("--device"), "{}", c.reason);
        // Given wins.
        let given = DeviceSpec::parse("nvme", None).unwrap();
        assert_eq!(choose(Some(given), &sample(14.0)).chosen, Chosen::Given);
        assert!(DeviceSpec::parse("floppy", None).is_err());
        assert!(DeviceSpec::parse("hdd-10k", Some("raid5:2")).is_err());
        assert_eq!(
            DeviceSpec::parse("hdd-10k", Some("raid5:5"))
                .unwrap()
                .flags(),
            "--device hdd-10k --array raid5:5:64k"
        );
    }
}
