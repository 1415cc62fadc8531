//! The driver's state: the client's surroundings in one task (links, the request path, the
//! requests it holds, the figures it keeps), which `driver.rs` moves and `metrics.rs` reports.

use super::*;

/// An NBD request the request path (`cordillera_volume::Volume`) has not answered yet.
pub(super) struct Pending {
    pub(super) reply: Completion,
    pub(super) arrived: Instant,
    pub(super) read: bool,
}

pub(super) struct Core {
    pub(super) label: Label,
    pub(super) disk: Disk,
    pub(super) links: Vec<Option<(u64, mpsc::Sender<Vec<u8>>)>>,
    /// The request path: requests cut into pieces, the cache, the pre-load.
    pub(super) volume: Volume,
    /// Requests in the request path, by tag.
    pub(super) requests: HashMap<u64, Pending>,
    pub(super) next_tag: u64,
    pub(super) reads: LatencyHistogram,
    pub(super) writes: LatencyHistogram,
    /// The client's own base and store I/O, timed by kind.
    pub(super) io: io_latency::IoLatency,
    /// (time, reclaimed bytes so far), one sample a second for the last minute.
    pub(super) reclaim_samples: VecDeque<(Instant, u64)>,
    /// Whether the stores were full at the last pump (for one WARN per episode).
    pub(super) stores_full: bool,
    /// Late writes (`Stats::late_writes`) already warned about, and when (one WARN per 10 s).
    pub(super) late_writes_warned: u64,
    pub(super) late_warned_at: Option<Instant>,
    /// Where non-durable base writes are done in place (see `serve`).
    pub(super) inline: Option<Arc<DiskFile>>,
    /// Where base reads the page cache holds are done in place (see `serve`).
    pub(super) cached_reads: Option<Arc<DiskFile>>,
    /// Base operations the device failed, and when that was last logged; the device's path.
    pub(super) base_errors: u64,
    pub(super) base_device: String,
    pub(super) base_error_warned_at: Option<Instant>,
    /// The cache's log file and writer (the cache itself is the request path's).
    pub(super) cache_log: Option<CacheLog>,
    /// Stopping: answered once the requests in flight are.
    pub(super) stopping: Option<oneshot::Sender<Result<(), String>>>,
}

impl Core {
    pub(super) fn new(label: Label, disk: Disk) -> Core {
        let n = label.stores.len();
        Core {
            label,
            disk,
            links: vec![None; n],
            volume: Volume::new(None),
            requests: HashMap::new(),
            next_tag: 0,
            reads: LatencyHistogram::default(),
            writes: LatencyHistogram::default(),
            io: Default::default(),
            reclaim_samples: VecDeque::new(),
            stores_full: false,
            late_writes_warned: 0,
            late_warned_at: None,
            inline: None,
            cached_reads: None,
            base_errors: 0,
            base_device: String::new(),
            base_error_warned_at: None,
            cache_log: None,
            stopping: None,
        }
    }
}
