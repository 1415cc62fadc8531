//! The modelling choices the paper leaves open, each a switch, so that a figure can be rerun with
//! one of them changed and the choice that moves it found by experiment: the disks' queue
//! discipline, what the utilization axis means, how large the stores are, how request sizes are
//! drawn. [`Model::default`] is what `lab striping` has always run.

use serde::Serialize;

use cordillera_models::device::hdd::{Hdd, Scheduler};
use cordillera_models::device::Device;
use cordillera_models::presets;

/// The queue discipline of every disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Queue {
    /// Shortest positioning time first over the oldest 32 (the presets' NCQ).
    Sptf,
    /// First come, first served (what a simulator of the paper's time most plausibly ran).
    Fcfs,
    /// C-LOOK elevator.
    Elevator,
}

impl Queue {
    fn scheduler(self) -> Scheduler {
        match self {
            Queue::Sptf => Scheduler::Sptf { window: 32 },
            Queue::Fcfs => Scheduler::Fcfs,
            Queue::Elevator => Scheduler::CLook,
        }
    }
}

/// What `--utilization` sets: which busy fraction, over which time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum UtilizationOf {
    /// The mean busy fraction of the array's disks while its store is ON.
    On,
    /// The same over the whole run, ON and OFF periods together (twice the load while ON, as a
    /// stream is ON half the time).
    Mean,
    /// The fraction of time the array has a request outstanding (some disk busy, or requests
    /// queued), while the store is ON: an array, not a disk, as the server.
    ArrayOn,
    /// The same over the whole run.
    ArrayMean,
}

impl UtilizationOf {
    /// Over ON periods only (rather than the whole run).
    pub fn while_on(self) -> bool {
        matches!(self, UtilizationOf::On | UtilizationOf::ArrayOn)
    }
    /// The array's busy fraction (rather than its disks').
    pub fn of_array(self) -> bool {
        matches!(self, UtilizationOf::ArrayOn | UtilizationOf::ArrayMean)
    }
}

/// How request sizes are drawn around a stream's mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Sizes {
    /// Exponential (§3.1).
    Exponential,
    /// Every request the mean (rounded to 512 bytes).
    Fixed,
}

impl std::str::FromStr for Queue {
    type Err = String;
    fn from_str(s: &str) -> Result<Queue, String> {
        match s {
            "sptf" => Ok(Queue::Sptf),
            "fcfs" => Ok(Queue::Fcfs),
            "elevator" => Ok(Queue::Elevator),
            _ => Err(format!("{s:?}: one of sptf, fcfs, elevator")),
        }
    }
}

impl std::str::FromStr for UtilizationOf {
    type Err = String;
    fn from_str(s: &str) -> Result<UtilizationOf, String> {
        match s {
            "on" => Ok(UtilizationOf::On),
            "mean" => Ok(UtilizationOf::Mean),
            "array-on" => Ok(UtilizationOf::ArrayOn),
            "array-mean" => Ok(UtilizationOf::ArrayMean),
            _ => Err(format!("{s:?}: one of on, mean, array-on, array-mean")),
        }
    }
}

impl std::str::FromStr for Sizes {
    type Err = String;
    fn from_str(s: &str) -> Result<Sizes, String> {
        match s {
            "exponential" => Ok(Sizes::Exponential),
            "fixed" => Ok(Sizes::Fixed),
            _ => Err(format!("{s:?}: one of exponential, fixed")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Model {
    pub queue: Queue,
    pub utilization_of: UtilizationOf,
    /// Each store's size; `None`: the stores fill their arrays (seeks over whole disks).
    pub store_bytes: Option<u64>,
    pub sizes: Sizes,
}

impl Default for Model {
    fn default() -> Model {
        Model {
            queue: Queue::Sptf,
            utilization_of: UtilizationOf::On,
            store_bytes: None,
            sizes: Sizes::Exponential,
        }
    }
}

impl Model {
    /// The choices that differ from the default, for a report's header ("" when none do).
    pub fn describe(&self) -> String {
        let d = Model::default();
        let mut parts = Vec::new();
        if self.queue != d.queue {
            parts.push(format!("disk queue {:?}", self.queue).to_lowercase());
        }
        if self.utilization_of != d.utilization_of {
            parts.push(format!(
                "utilization of the {} {}",
                if self.utilization_of.of_array() {
                    "array (a request outstanding)"
                } else {
                    "disks"
                },
                if self.utilization_of.while_on() {
                    "while ON"
                } else {
                    "over the run"
                }
            ));
        }
        if let Some(b) = self.store_bytes {
            parts.push(format!("stores of {} MiB", b >> 20));
        }
        if self.sizes != d.sizes {
            parts.push("fixed request sizes".to_string());
        }
        parts.join(", ")
    }

    /// One disk of `preset` under this model's queue discipline (a solid-state preset as it is).
    pub fn disk(&self, preset: &str) -> Result<Box<dyn Device>, String> {
        match presets::hdd_params(preset) {
            Some(mut params) => {
                params.scheduler = self.queue.scheduler();
                Ok(Box::new(Hdd::new(params)))
            }
            None => presets::device(preset),
        }
    }

    /// A generated request's size under this model: `drawn` as it came, or the stream's mean.
    pub fn size(&self, drawn: u64, mean_bytes: f64) -> u64 {
        match self.sizes {
            Sizes::Exponential => drawn,
            Sizes::Fixed => ((mean_bytes / 512.0).round() as u64).max(1) * 512,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_models::device::{drain, IoRequest};
    use cordillera_types::Op;

    /// Two far reads queued behind a near one: FCFS serves them in arrival order, SPTF the
    /// near one first — the switch reaches the disk.
    #[test]
    fn the_queue_switch_changes_the_order_a_disk_serves() {
        let order = |queue: Queue| {
            let mut disk = Model {
                queue,
                ..Model::default()
            }
            .disk("fujitsu-maj3182mc")
            .unwrap();
            let far = disk.capacity_bytes() - (1 << 20);
            for (id, offset) in [(0u64, 0u64), (1, far), (2, 4096), (3, far - 8192)] {
                let request = IoRequest {
                    id,
                    op: Op::Read,
                    offset_bytes: offset,
                    length_bytes: 4096,
                };
                disk.submit(0, request);
            }
            let done: Vec<u64> = drain(disk.as_mut()).iter().map(|c| c.id).collect();
            done
        };
        assert_eq!(order(Queue::Fcfs), vec![0, 1, 2, 3]);
        let sptf = order(Queue::Sptf);
        assert_eq!(sptf.len(), 4);
        assert_ne!(sptf, vec![0, 1, 2, 3], "SPTF served in arrival order");
    }

    #[test]
    fn fixed_sizes_are_the_mean_in_sectors() {
        let m = Model {
            sizes: Sizes::Fixed,
            ..Model::default()
        };
        assert_eq!(m.size(12_345, 64e3), 64_000);
        assert_eq!(Model::default().size(12_345, 64e3), 12_345);
        assert_eq!(Model::default().describe(), "");
        assert_eq!(m.describe(), "fixed request sizes");
    }
}
