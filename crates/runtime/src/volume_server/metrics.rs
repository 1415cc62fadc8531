//! The volume's figures: Prometheus metrics, the JSON status and the HTTP endpoint serving
//! them.

use super::*;
use crate::http::{self, Response};
use cordillera_offload::client::StoreFigures;

impl Core {
    /// Reclaimed bytes per second over the last minute's samples.
    pub(super) fn reclaim_rate(&self) -> f64 {
        match (self.reclaim_samples.front(), self.reclaim_samples.back()) {
            (Some((t0, b0)), Some((t1, b1))) if t1 > t0 => {
                (b1 - b0) as f64 / t1.duration_since(*t0).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    pub(super) fn metrics(&self, client: &Client) -> String {
        use std::fmt::Write;
        let stats = client.stats();
        let mut out = String::new();
        let mut gauge = |name: &str, help: &str, kind: &str, value: f64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        gauge(
            "cordillera_volume_ready",
            "1 once the export accepts I/O.",
            "gauge",
            client.is_ready() as u8 as f64,
        );
        gauge(
            "cordillera_volume_base_queue_length",
            "Requests in flight on the base volume.",
            "gauge",
            client.base_load() as f64,
        );
        gauge(
            "cordillera_volume_offloaded_bytes",
            "Bytes whose latest version is on stores, not yet reclaimed.",
            "gauge",
            stats.offloaded_bytes as f64,
        );
        let config = client.config();
        for (name, help, bound) in [
            (
                "cordillera_volume_offload_bytes_max",
                "The off-load bound in total (--offload-bytes-max; absent: none).",
                config.offload_bytes_max,
            ),
            (
                "cordillera_volume_offload_bytes_max_per_store",
                "The off-load bound per store (--offload-bytes-max-per-store; absent: none).",
                config.offload_bytes_max_per_store,
            ),
        ] {
            if let Some(b) = bound {
                gauge(name, help, "gauge", b as f64);
            }
        }
        gauge(
            "cordillera_volume_bound_writes_total",
            "Writes sent to the base volume, or held back, at the off-load bound.",
            "counter",
            stats.bound_writes as f64,
        );
        gauge(
            "cordillera_volume_offloaded_writes_total",
            "Writes sent to stores.",
            "counter",
            stats.offloaded_writes as f64,
        );
        gauge(
            "cordillera_volume_offloaded_write_bytes_total",
            "Bytes written to stores.",
            "counter",
            stats.offloaded_write_bytes as f64,
        );
        gauge(
            "cordillera_volume_base_writes_total",
            "Writes sent to the base volume.",
            "counter",
            stats.base_writes as f64,
        );
        gauge(
            "cordillera_volume_base_reads_total",
            "Reads (or pieces of reads) sent to the base volume.",
            "counter",
            stats.base_reads as f64,
        );
        gauge(
            "cordillera_volume_store_reads_total",
            "Pieces of reads sent to stores (off-loaded data), reclaim's reads not included.",
            "counter",
            stats.store_reads as f64,
        );
        gauge(
            "cordillera_volume_reclaimed_bytes_total",
            "Bytes reclaimed from stores to the base volume.",
            "counter",
            stats.reclaimed_bytes as f64,
        );
        gauge(
            "cordillera_volume_reclaim_bytes_per_second",
            "Reclaim rate over the last minute.",
            "gauge",
            self.reclaim_rate(),
        );
        gauge(
            "cordillera_volume_stores_full",
            "1 while every store refuses the writes that must be off-loaded as full.",
            "gauge",
            client.stores_full_since().is_some() as u8 as f64,
        );
        failure_counters(&stats, &mut gauge);
        self.store_metrics(client, &mut out);
        self.reads.render(
            "cordillera_volume_read_seconds",
            "Read response time at the export.",
            &mut out,
        );
        self.writes.render(
            "cordillera_volume_write_seconds",
            "Write response time at the export.",
            &mut out,
        );
        for kind in super::io_latency::IoKind::ALL {
            let name = format!("cordillera_volume_{}_seconds", kind.name());
            self.io.histogram(kind).render(&name, kind.help(), &mut out);
        }
        if let Some(c) = self.volume.cache() {
            crate::warm_cache::metrics(c, &mut out);
        }
        out
    }

    /// The per-store gauges, labelled by the store's address.
    fn store_metrics(&self, client: &Client, out: &mut String) {
        use std::fmt::Write;
        let figures = client.store_figures();
        // One gauge per store, labelled by its address.
        let mut per_store = |name: &str, help: &str, value: &dyn Fn(&StoreFigures) -> u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (i, f) in figures.iter().enumerate() {
                let store = self.label.stores.get(i).map_or("?", |s| s.as_str());
                let _ = writeln!(out, "{name}{{store=\"{store}\"}} {}", value(f));
            }
        };
        per_store(
            "cordillera_volume_store_up",
            "1 when the store answers.",
            &|f| f.up as u64,
        );
        per_store(
            "cordillera_volume_store_queue_length",
            "Requests in flight to the store.",
            &|f| f.in_flight,
        );
        per_store(
            "cordillera_volume_store_offloaded_bytes",
            "Bytes whose latest version the store holds.",
            &|f| f.offloaded_bytes,
        );
        per_store(
            "cordillera_volume_store_stale_bytes",
            "Bytes of stale copies the store still holds for the volume (deletes owed to it).",
            &|f| f.stale_bytes,
        );
    }

    pub(super) fn status(&self, client: &Client) -> String {
        let stats = client.stats();
        let rate = self.reclaim_rate();
        let stores: Vec<serde_json::Value> = client
            .store_figures()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                serde_json::json!({
                    "address": self.label.stores.get(i),
                    "up": f.up,
                    "removed": f.removed,
                    "offloaded_bytes": f.offloaded_bytes,
                    "stale_bytes": f.stale_bytes,
                    "unsent_delete_bytes": f.unsent_delete_bytes,
                    "in_flight": f.in_flight,
                    "reported_load": f.reported_load,
                    "volume_load": f.volume_load,
                })
            })
            .collect();
        let eta = if stats.offloaded_bytes == 0 {
            Some(0.0)
        } else if rate > 0.0 {
            Some(stats.offloaded_bytes as f64 / rate)
        } else {
            None
        };
        let recovery = client.recovery_wait().map(|w| {
            serde_json::json!({
                "answered": w.answered,
                "stores": w.stores,
                "needed": w.needed,
                "degraded": waits_for_every_store(&w, client.config().n_way),
                "failed": w.failed,
                "silent": w.silent,
            })
        });
        serde_json::json!({
            "ready": client.is_ready(),
            "recovery": recovery,
            "client": format!("{:016x}", self.label.client),
            "policy": format!("{:?}", client.config().policy),
            "n_way": client.config().n_way,
            "base_queue_length": client.base_load(),
            "stores_full": client.stores_full_since().is_some(),
            "refused_writes": stats.refused_writes,
            "late_writes": stats.late_writes,
            "base_errors": stats.base_errors,
            "too_few_copies": stats.too_few_copies,
            "copies_resent": stats.copies_resent,
            "writes_reversioned": stats.writes_reversioned,
            "lost_copies": stats.lost_copies,
            "hidden_copies": stats.hidden_copies,
            "unsealed_ranges": stats.unsealed_ranges,
            "seals": stats.seals,
            "lost_bytes": stats.lost_bytes,
            "offloaded_bytes": stats.offloaded_bytes,
            "offload_bytes_max": client.config().offload_bytes_max,
            "offload_bytes_max_per_store": client.config().offload_bytes_max_per_store,
            "bound_writes": stats.bound_writes,
            "offloaded_writes": stats.offloaded_writes,
            "base_writes": stats.base_writes,
            "base_reads": stats.base_reads,
            "store_reads": stats.store_reads,
            "io_latency": self.io_latency_json(),
            "reclaimed_bytes": stats.reclaimed_bytes,
            "reclaimed_at_risk_bytes": stats.reclaimed_at_risk_bytes,
            "store_failures": stats.store_failures,
            "reclaim_bytes_per_second": rate,
            "reclaim_eta_seconds": eta,
            "quiescent": client.is_quiescent(),
            "stores": stores,
            "state": client.describe(),
            "cache": match (self.volume.cache(), &self.cache_log) {
                (Some(c), Some(l)) => Some(l.status_json(c)),
                _ => None,
            },
        })
        .to_string()
    }
}

impl Core {
    /// The client's own I/O by kind: how many completed and their mean time in ms.
    fn io_latency_json(&self) -> serde_json::Value {
        let kinds = super::io_latency::IoKind::ALL.map(|kind| {
            let h = self.io.histogram(kind);
            let mean_ms = 1e3 * h.sum_s / h.count.max(1) as f64;
            (
                kind.name().to_string(),
                serde_json::json!({ "count": h.count, "seconds": h.sum_s, "mean_ms": mean_ms }),
            )
        });
        serde_json::Value::Object(kinds.into_iter().collect())
    }
}

/// Latency buckets of the histograms, in seconds (Prometheus `le`).
pub(super) const BUCKETS_S: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Default)]
pub(super) struct LatencyHistogram {
    pub(super) counts: [u64; BUCKETS_S.len() + 1],
    pub(super) sum_s: f64,
    pub(super) count: u64,
}

impl LatencyHistogram {
    pub(super) fn record(&mut self, seconds: f64) {
        let i = BUCKETS_S
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS_S.len());
        self.counts[i] += 1;
        self.sum_s += seconds;
        self.count += 1;
    }

    pub(super) fn render(&self, name: &str, help: &str, out: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, b) in BUCKETS_S.iter().enumerate() {
            cumulative += self.counts[i];
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum_s);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

/// `GET /metrics` (Prometheus text) and `GET /status` (JSON) over plain HTTP/1, and `POST
/// /cache/reset`; with a control token, all but loopback reads need it.
pub(super) async fn serve_metrics(
    listener: TcpListener,
    events: mpsc::Sender<Event>,
    token: Option<crate::http::ControlToken>,
) {
    crate::http::serve(listener, token, move |method: String, path: String| {
        let events = events.clone();
        async move {
            match path.as_str() {
                "/cache/reset" if method == "POST" => {
                    let (reply, answer) = oneshot::channel();
                    let _ = events.send(Event::CacheReset { reply }).await;
                    match answer.await {
                        Ok(Some(body)) => Response::ok(http::JSON, body),
                        Ok(None) => Response::text(
                            "409 Conflict",
                            "this volume has no cache (--cache-size)\n",
                        ),
                        Err(_) => Response::stopping(),
                    }
                }
                "/metrics" | "/status" => {
                    let (reply, answer) = oneshot::channel();
                    let json = path == "/status";
                    let _ = events.send(Event::Report { json, reply }).await;
                    match answer.await {
                        Ok(body) => {
                            Response::ok(if json { http::JSON } else { http::PROMETHEUS }, body)
                        }
                        Err(_) => Response::stopping(),
                    }
                }
                _ => Response::text(
                    "404 Not Found",
                    "try /metrics, /status or POST /cache/reset\n",
                ),
            }
        }
    })
    .await
}

/// `volume status` as text, from the `/status` document: the client, what is off-loaded and
/// how fast it is reclaimed, each store, the cache and its warm-up.
pub fn status_text(v: &serde_json::Value) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mib = |x: &serde_json::Value| x.as_f64().unwrap_or(0.0) / (1 << 20) as f64;
    let _ = writeln!(
        out,
        "volume client {}: {}, policy {}, n-way {}",
        v["client"].as_str().unwrap_or("?"),
        if v["ready"].as_bool() == Some(true) {
            "ready"
        } else {
            "starting"
        },
        v["policy"].as_str().unwrap_or("?"),
        v["n_way"]
    );
    let _ = writeln!(
        out,
        "off-loaded now: {:.1} MiB; base queue {}; reclaimed so far {:.1} MiB at {:.1} MiB/s (last minute)",
        mib(&v["offloaded_bytes"]),
        v["base_queue_length"],
        mib(&v["reclaimed_bytes"]),
        mib(&v["reclaim_bytes_per_second"]),
    );
    if let Some(max) = v["offload_bytes_max"].as_f64() {
        let _ = writeln!(
            out,
            "off-load bound: {:.1} MiB in total ({} writes kept on the base by it)",
            max / (1 << 20) as f64,
            v["bound_writes"]
        );
    }
    if let Some(max) = v["offload_bytes_max_per_store"].as_f64() {
        let _ = writeln!(
            out,
            "off-load bound per store: {:.1} MiB",
            max / (1 << 20) as f64
        );
    }
    match v["reclaim_eta_seconds"].as_f64() {
        Some(0.0) => out.push_str("reclaim: nothing to reclaim\n"),
        Some(s) => {
            let _ = writeln!(out, "reclaim: about {s:.0} s to finish at the current rate");
        }
        None => out.push_str(
            "reclaim: not progressing now (the base volume is busy, or off-load is always on)\n",
        ),
    }
    let _ = writeln!(
        out,
        "{:<24} {:>4} {:>14} {:>10} {:>8}",
        "store", "up", "off-loaded MiB", "in flight", "load"
    );
    for s in v["stores"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "{:<24} {:>4} {:>14.1} {:>10} {:>8}",
            s["address"].as_str().unwrap_or("?"),
            if s["up"].as_bool() == Some(true) {
                "yes"
            } else {
                "no"
            },
            mib(&s["offloaded_bytes"]),
            s["in_flight"],
            s["reported_load"]
        );
    }
    let c = &v["cache"];
    if c.is_object() {
        let pct = |x: &serde_json::Value| {
            x.as_f64()
                .map_or("-".to_owned(), |r| format!("{:.1} %", r * 100.0))
        };
        let _ = writeln!(
            out,
            "cache: {:.1} of {:.1} MiB held; read hit rate {} ({} of {} blocks)",
            c["cached_blocks"].as_f64().unwrap_or(0.0) * 4096.0 / (1 << 20) as f64,
            mib(&c["capacity_bytes"]),
            pct(&c["hit_rate"]),
            c["hit_blocks"],
            c["read_blocks"]
        );
        let w = &c["warmup"];
        let _ = writeln!(
            out,
            "warm-up: {}; {} of {} planned blocks loaded ({:.1} MiB){}",
            w["source"].as_str().unwrap_or("?"),
            w["loaded_blocks"],
            w["planned_blocks"],
            mib(&w["loaded_bytes"]),
            match w["seconds"].as_f64() {
                Some(s) => format!(" in {s:.2} s"),
                None => ", still loading".into(),
            }
        );
        let recent: Vec<String> = c["hit_rates"]
            .as_array()
            .into_iter()
            .flatten()
            .rev()
            .take(6)
            .map(pct)
            .collect();
        if !recent.is_empty() {
            let _ = writeln!(
                out,
                "hit rate per {} s, newest first: {}",
                c["hit_rate_samples_s"],
                recent.join(", ")
            );
        }
        if c["log_failed"].as_bool() == Some(true) {
            let _ = writeln!(
                out,
                "warm-up log FAILED: {} (monitoring continues in memory only)",
                c["log_error"].as_str().unwrap_or("?")
            );
        }
    }
    out
}

/// The counters of writes refused, failed or answered with an error, and of stores failed.
fn failure_counters(
    stats: &cordillera_offload::client::Stats,
    gauge: &mut impl FnMut(&str, &str, &str, f64),
) {
    gauge(
        "cordillera_volume_refused_writes_total",
        "Writes answered ENOSPC because the stores were full.",
        "counter",
        stats.refused_writes as f64,
    );
    gauge(
        "cordillera_volume_base_errors_total",
        "Base-volume operations its device failed (each failed its own request: EIO, or ENOSPC).",
        "counter",
        stats.base_errors as f64,
    );
    gauge(
            "cordillera_volume_late_writes_total",
            "Of the writes answered ENOSPC, those no store took within the full timeout of their arrival (a store cleaning too slowly, or none up).",
            "counter",
            stats.late_writes as f64,
        );
    gauge(
        "cordillera_volume_too_few_copies_total",
        "Off-loaded writes answered EIO because fewer than N stores took them in time.",
        "counter",
        stats.too_few_copies as f64,
    );
    gauge(
        "cordillera_volume_copies_resent_total",
        "Copies of off-loaded writes sent again to reach N.",
        "counter",
        stats.copies_resent as f64,
    );
    gauge(
        "cordillera_volume_writes_reversioned_total",
        "Off-loaded writes short of N copies sent again whole under a fresh version.",
        "counter",
        stats.writes_reversioned as f64,
    );
    gauge(
        "cordillera_volume_store_failures_total",
        "Stores marked failed.",
        "counter",
        stats.store_failures as f64,
    );
}
