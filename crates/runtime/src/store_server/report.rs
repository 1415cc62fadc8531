//! The store's figures: the load broadcast to its clients, and its HTTP endpoint's `/status`
//! (JSON) and `/metrics` (Prometheus text).

use super::*;

/// A request for the store's figures from its HTTP endpoint.
pub(super) struct ReportRequest {
    pub(super) json: bool,
    pub(super) reply: tokio::sync::oneshot::Sender<String>,
}

/// What `/status` and `/metrics` show.
#[derive(serde::Serialize)]
pub(super) struct StoreReport<'a> {
    rack: Option<&'a str>,
    connections: usize,
    /// Requests in progress (the load figure clients see).
    queue_length: u32,
    requests_per_s: u32,
    mean_response_us: u32,
    used_bytes: u64,
    log_bytes: u64,
    valid_data_bytes: u64,
    records_written: u64,
    flushes: u64,
    cleaned_bytes: u64,
    full_refusals: u64,
    /// The store's machine by the server power model: busy while its disk has operations in
    /// flight, idle otherwise (a store never sleeps).
    power: PowerReport,
}

impl StoreReport<'_> {
    fn metrics(&self) -> String {
        let mut out = String::new();
        let mut line =
            |name: &str, help: &str, value: u64| crate::http::gauge(&mut out, name, help, value);
        line(
            "store_queue_length",
            "Requests in progress.",
            self.queue_length as u64,
        );
        line(
            "store_requests_per_second",
            "Requests over the last second.",
            self.requests_per_s as u64,
        );
        line(
            "store_mean_response_microseconds",
            "Mean response time, recent.",
            self.mean_response_us as u64,
        );
        line("store_used_bytes", "Log bytes in use.", self.used_bytes);
        line("store_log_bytes", "Log size.", self.log_bytes);
        line(
            "store_valid_data_bytes",
            "Bytes of live data.",
            self.valid_data_bytes,
        );
        line(
            "store_records_written_total",
            "Records written.",
            self.records_written,
        );
        line(
            "store_full_refusals_total",
            "Writes refused: the log is full.",
            self.full_refusals,
        );
        line(
            "store_connections",
            "Connections open.",
            self.connections as u64,
        );
        line(
            "store_disk_busy_milliseconds_total",
            "Time the disk had operations in flight.",
            (self.power.busy_s * 1e3) as u64,
        );
        line(
            "store_energy_joules_total",
            "Energy by the server power model.",
            self.power.energy_j as u64,
        );
        out
    }
}

/// The HTTP endpoint (when asked for) and the channel its requests for the figures come by.
pub(super) async fn serve_http(
    addr: Option<&str>,
) -> Result<(mpsc::Sender<ReportRequest>, mpsc::Receiver<ReportRequest>)> {
    let (report_tx, report_rx) = mpsc::channel::<ReportRequest>(16);
    if let Some(addr) = addr {
        let http = crate::http::serve_reports(addr, report_tx.clone(), |json, reply| {
            ReportRequest { json, reply }
        })
        .await?;
        tracing::info!(%http, "store metrics on http://{http}/metrics");
    }
    Ok((report_tx, report_rx))
}

/// The load figures to every connection, except one that leaves its replies unread (they
/// carry the figures too).
pub(super) fn broadcast_load(connections: &Connections, figures: Load) {
    let mut frame = Vec::new();
    encode(&Frame::Load(figures), &mut frame);
    for (sender, unwritten) in connections.values() {
        if unwritten.load(Ordering::Relaxed) == 0 {
            unwritten.fetch_add(1, Ordering::Relaxed);
            send_frame(
                sender,
                Outgoing {
                    frame: frame.clone(),
                    data: Vec::new(),
                    _charge: None,
                    unwritten: unwritten.clone(),
                },
            );
        }
    }
}

/// The HTTP endpoint's report: `/metrics` text, or JSON.
pub(super) fn report_text(
    store: &Store,
    load: &mut LoadMeter,
    (requests, connections): (usize, usize),
    (rack, power): (Option<&str>, PowerReport),
    json: bool,
) -> String {
    let figures = load.figures(requests, store);
    let stats = store.stats();
    let report = StoreReport {
        rack,
        connections,
        queue_length: figures.queue_length,
        requests_per_s: figures.requests_per_s,
        mean_response_us: figures.mean_response_us,
        used_bytes: figures.used_bytes,
        log_bytes: figures.log_bytes,
        // Live now (the store's stat is the figure its recovery found).
        valid_data_bytes: store
            .clients()
            .iter()
            .flat_map(|(_, extents)| extents)
            .map(|e| e.length_bytes)
            .sum(),
        records_written: stats.records_written,
        flushes: stats.flushes,
        cleaned_bytes: stats.cleaned_bytes,
        full_refusals: stats.full_refusals,
        power,
    };
    if json {
        serde_json::to_string_pretty(&report).expect("a report serializes")
    } else {
        report.metrics()
    }
}

/// Request rate and response time, for the load figures.
#[derive(Default)]
pub(super) struct LoadMeter {
    recent: VecDeque<Instant>,
    mean_response_us: f64,
    /// The emulated device the log lives on, when it is shared (a partition of a volume's
    /// disk): its queue, the volume's operations included, is the store's queue length.
    device: Option<crate::emulate::Emulator>,
}

impl LoadMeter {
    /// Reports the queue of `device` (every user's operations) where it is longer than the
    /// store's own requests: Everest's store reports its disk's load, so that clients stop
    /// off-loading onto a disk that its own volume keeps busy.
    pub(super) fn on_device(device: Option<crate::emulate::Emulator>) -> LoadMeter {
        LoadMeter {
            device,
            ..LoadMeter::default()
        }
    }

    /// A request answered at `now` after `response`.
    pub(super) fn completed(&mut self, now: Instant, response: Duration) {
        self.recent.push_back(now);
        while self
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(1))
        {
            self.recent.pop_front();
        }
        let us = response.as_secs_f64() * 1e6;
        self.mean_response_us = if self.mean_response_us == 0.0 {
            us
        } else {
            0.9 * self.mean_response_us + 0.1 * us
        };
    }

    pub(super) fn figures(&mut self, queue_length: usize, store: &Store) -> Load {
        self.figures_at(Instant::now(), queue_length, store)
    }

    /// The figures as of `now` (one clock reading serves a batch of replies).
    pub(super) fn figures_at(&mut self, now: Instant, queue_length: usize, store: &Store) -> Load {
        while self
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(1))
        {
            self.recent.pop_front();
        }
        let device_queue = self.device.as_ref().map_or(0, |d| d.queue_depth());
        let volume_queue = self.device.as_ref().map_or(0, |d| d.others_queue_depth());
        Load {
            queue_length: queue_length.max(device_queue) as u32,
            requests_per_s: self.recent.len() as u32,
            mean_response_us: self.mean_response_us as u32,
            used_bytes: store.used_bytes(),
            log_bytes: store.log_bytes(),
            volume_queue_length: volume_queue as u32,
        }
    }
}
