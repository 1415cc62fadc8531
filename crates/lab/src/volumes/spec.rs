//! What a run of volumes is given and what it reports: the volumes, their load (a trace or a
//! closed loop), where clients and stores sit, and each volume's figures.

use super::*;

/// One request of an open-loop load, at its arrival time (from the run's start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoReq {
    pub at_ns: Nanos,
    pub op: Op,
    pub offset_bytes: u64,
    pub length_bytes: u64,
}

/// What a volume's upper layer issues.
#[derive(Clone, Debug)]
pub enum Load {
    /// Requests at their arrival times (trace replay).
    Open(Vec<IoReq>),
    /// `depth` requests always in flight from `from_ns` until `until_ns` (micro-benchmarks).
    Closed {
        depth: usize,
        read_fraction: f64,
        sequential: bool,
        request_bytes: u64,
        span_bytes: u64,
        from_ns: Nanos,
        until_ns: Nanos,
        /// A hot region taking a share of the requests (uniform over the span when `None`).
        hot: Option<Hot>,
    },
    Idle,
}

/// Locality of a closed loop: `share` of its requests, reads and writes alike, fall uniformly
/// in the first `span_fraction` of its span, the rest uniformly over the whole span.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Hot {
    pub span_fraction: f64,
    pub share: f64,
}

impl std::str::FromStr for Hot {
    type Err = String;
    /// `SPAN:SHARE`, both fractions: `0.1:0.9` sends 90 % of requests to the first 10 %.
    fn from_str(s: &str) -> Result<Hot, String> {
        let bad = || format!("{s:?}: expected SPAN:SHARE, two fractions (0.1:0.9)");
        let (span, share) = s.split_once(':').ok_or_else(bad)?;
        let hot = Hot {
            span_fraction: span.trim().parse().map_err(|_| bad())?,
            share: share.trim().parse().map_err(|_| bad())?,
        };
        let ok =
            hot.span_fraction > 0.0 && hot.span_fraction <= 1.0 && (0.0..=1.0).contains(&hot.share);
        if !ok {
            return Err(format!(
                "{s:?}: the span must be in (0, 1] and the share in [0, 1]"
            ));
        }
        Ok(hot)
    }
}

/// One volume: its load and whether it hosts a client (which off-loads to the stores of the
/// volumes listed in `store_set`) and a store.
#[derive(Clone, Debug)]
pub struct VolumeSpec {
    pub load: Load,
    pub client: bool,
    pub store: bool,
    pub store_set: Vec<usize>,
}

/// The server: identical volumes, one per [`VolumeSpec`].
#[derive(Clone, Debug)]
pub struct Setup {
    pub device: String,
    pub array: Option<ArraySpec>,
    /// NVRAM in front of each volume.
    pub nvram: Option<NvramParams>,
    /// The store's partition, as a fraction of the volume (at its end).
    pub store_fraction: f64,
    pub policy: Policy,
    /// Copies of each off-loaded write (on stores of different volumes).
    pub n_way: usize,
    pub t_base: u64,
    pub t_store: u64,
    pub n_reclaim: usize,
    pub volumes: Vec<VolumeSpec>,
    /// Off-loaded data is sampled this often.
    pub sample_ns: Nanos,
    /// The run lasts at least this long (from the first request) and ends once every request
    /// is answered, or at `stop_ns` whatever remains.
    pub end_ns: Nanos,
    pub stop_ns: Nanos,
    /// At this instant (from the first request) the policy of every client becomes this one.
    pub switch_policy: Option<(Nanos, Policy)>,
    /// Every volume's server crashes at this instant and restarts 1 ms later; no request is
    /// issued after the crash (Everest Table 3).
    pub crash_at: Option<Nanos>,
    /// Time each client call (CPU cost of the client core).
    pub time_client: bool,
    /// The run also waits (until `stop_ns`) for every client to have reclaimed everything.
    pub until_reclaimed: bool,
    /// Each client's off-load bound (`Config::offload_bytes_max`).
    pub offload_bytes_max: Option<u64>,
    pub seed: u64,
}

impl Setup {
    /// Everest §4.1's testbed volume: a RAID-0 of four Cheetah 15K disks with a store on the
    /// last 3 % (strictly less), peak off-load with T_base = T_store = 32 and N_reclaim = 256.
    pub fn everest(volumes: Vec<VolumeSpec>) -> Setup {
        Setup {
            device: "cheetah-15k".into(),
            array: Some("raid0:4".parse().expect("a valid array")),
            nvram: None,
            store_fraction: 0.029,
            policy: Policy::Peak,
            n_way: 1,
            t_base: 32,
            t_store: 32,
            n_reclaim: 256,
            volumes,
            sample_ns: 10_000_000_000,
            end_ns: 0,
            stop_ns: u64::MAX / 4,
            switch_policy: None,
            crash_at: None,
            time_client: false,
            until_reclaimed: false,
            offload_bytes_max: None,
            seed: 1,
        }
    }

    pub(super) fn new_device(&self) -> Box<dyn Device> {
        let device = presets::build(&self.device, self.array).expect("a valid device");
        match &self.nvram {
            None => device,
            Some(params) => Box::new(Nvram::new(params.clone(), device)),
        }
    }

    /// Where the store's partition starts, the log size, and the client's volume size.
    pub fn layout(&self) -> Layout {
        let capacity = self.new_device().capacity_bytes();
        let partition = ((capacity as f64 * self.store_fraction) as u64) / (1 << 20) * (1 << 20);
        let store_offset = capacity - partition;
        let log_bytes = (partition - (1 << 20)) / RECORD_ALIGN * RECORD_ALIGN;
        Layout {
            capacity_bytes: capacity,
            store_offset,
            log_bytes,
            volume_bytes: store_offset,
            usable_bytes: store_offset - SUPERBLOCK_BYTES,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub capacity_bytes: u64,
    pub store_offset: u64,
    pub log_bytes: u64,
    /// The client's base volume (its store set at the end).
    pub volume_bytes: u64,
    /// Bytes the upper layer addresses.
    pub usable_bytes: u64,
}

/// What one volume saw.
#[derive(Clone, Debug, Default)]
pub struct VolumeResult {
    pub reads: Histogram,
    pub writes: Histogram,
    pub issued: u64,
    pub answered: u64,
    pub errors: u64,
    pub bytes_done: u64,
    /// The client's off-loaded bytes at each sample (from the first request).
    pub offloaded: Vec<u64>,
    /// Requests answered by each sample (from the first request): throughput over a window.
    pub answered_samples: Vec<u64>,
    /// The client's reads from the stores and from the base volume by each sample (pieces of
    /// upper-layer reads, not reclaim's).
    pub read_samples: Vec<(u64, u64)>,
    pub client: Option<cordillera_offload::client::Stats>,
    /// The client core's time (when timed), in ns.
    pub client_cpu_ns: u64,
    /// After a restart: when the store and the client were ready (ns after the restart), what
    /// the store's recovery scanned, and the store's metadata size (32 bytes an extent).
    pub store_recovery_ns: Option<Nanos>,
    pub client_recovery_ns: Option<Nanos>,
    pub store_stats: Option<cordillera_vstore::store::Stats>,
    pub metadata_bytes: u64,
    /// Disk I/Os on the volume: the client's (base) and the store's.
    pub base_ios: u64,
    pub store_read_ios: u64,
    pub store_write_ios: u64,
    pub store_write_bytes: u64,
}

/// The whole run.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub volumes: Vec<VolumeResult>,
    /// The largest sum of every client's off-loaded bytes at any moment of the run (exact:
    /// updated on every change, not sampled).
    pub offloaded_peak_bytes: u64,
    pub sample_ns: Nanos,
    /// When the last request was answered (from the first request).
    pub last_answer_ns: Nanos,
    /// When the run stopped (from the first request).
    pub stopped_ns: Nanos,
    pub layout: Layout,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hot_region_is_read_as_span_and_share() {
        let h: Hot = "0.1:0.9".parse().unwrap();
        assert_eq!(
            h,
            Hot {
                span_fraction: 0.1,
                share: 0.9
            }
        );
        for bad in ["0.1", "0:0.5", "1.5:0.5", "0.1:1.2", "a:b", "0.1:-0.1"] {
            assert!(bad.parse::<Hot>().is_err(), "{bad} accepted");
        }
    }
}
