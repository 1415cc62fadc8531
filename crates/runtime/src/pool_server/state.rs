//! The pool's control operations (create a volume, add an array), its status and metrics, and
//! its HTTP endpoint.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use cordillera_striping::layout::{
    level_name, parse_level, ArrayRecord, ExtentRecord, VolumeRecord,
};
use cordillera_striping::policy::{self, Knowledge, Policy, Setting};
use cordillera_striping::ArraySpec;
use serde::{Deserialize, Serialize};

use super::{ArrayDev, NewArray, PoolServer};
use crate::http;

pub(super) fn array_record(a: &NewArray) -> Result<ArrayRecord, String> {
    let level = parse_level(&a.level)?;
    let spec = ArraySpec {
        level,
        disks: a.disks,
        disk_bytes: a.disk_bytes,
    };
    // Checked by the pool (disk count for the level, sizes).
    cordillera_striping::Pool::new(&[spec]).map_err(|e| format!("{}: {e}", a.describe()))?;
    if let Some(e) = a.emulate_spec() {
        e.parse::<crate::emulate::EmulateSpec>()
            .map_err(|e| format!("--emulate: {e}"))?;
    }
    let utf8 = |p: &std::path::PathBuf| {
        p.to_str()
            .map(str::to_string)
            .ok_or_else(|| format!("{}: not a UTF-8 path", p.display()))
    };
    let paths = a.paths.iter().map(utf8).collect::<Result<Vec<_>, _>>()?;
    if paths.is_empty() {
        return Err("an array needs a device or members".into());
    }
    let record = if a.members() {
        ArrayRecord {
            path: String::new(),
            members: paths,
            unit_bytes: Some(a.unit_bytes),
            level: level_name(level).into(),
            disks: a.disks,
            disk_bytes: a.disk_bytes,
            emulate: a.emulate_spec(),
            id: Some(format!(
                "{:016x}{:016x}",
                super::members::random_id(),
                super::members::random_id()
            )),
        }
    } else {
        ArrayRecord {
            path: paths[0].clone(),
            members: Vec::new(),
            unit_bytes: None,
            level: level_name(level).into(),
            disks: a.disks,
            disk_bytes: a.disk_bytes,
            emulate: a.emulate_spec(),
            id: None,
        }
    };
    record
        .geometry()
        .map_err(|e| format!("array {}: {e}", a.describe()))?;
    Ok(record)
}

/// Creates a missing array file of `bytes` (sparse); an existing file or device must hold
/// them.
pub(super) fn prepare_device(path: &Path, bytes: u64) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(|e| format!("creating array file {}: {e}", path.display()))?;
            f.set_len(bytes)
                .map_err(|e| format!("sizing array file {}: {e}", path.display()))?;
            f.sync_all().map_err(|e| format!("{}: {e}", path.display()))
        }
        Err(e) => Err(format!("array device {}: {e}", path.display())),
    }
}

/// A `create-volume` request.
#[derive(Clone, Debug, Default)]
pub struct CreateVolume {
    pub name: String,
    pub size_bytes: u64,
    /// `wide`, `narrow` or `auto`.
    pub policy: String,
    pub stripe_unit_bytes: Option<u64>,
    pub mean_request_bytes: Option<u64>,
    pub iops: Option<f64>,
    pub write_fraction: Option<f64>,
}

impl CreateVolume {
    /// From a query string (`name=…&size=…&policy=…`).
    pub fn from_query(query: &str) -> Result<CreateVolume, String> {
        let mut c = CreateVolume::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?}: expected key=value"))?;
            let num = |v: &str| {
                v.parse::<u64>()
                    .map_err(|_| format!("{k}={v}: not a number"))
            };
            let real = |v: &str| {
                v.parse::<f64>()
                    .map_err(|_| format!("{k}={v}: not a number"))
            };
            match k {
                "name" => c.name = v.to_string(),
                "size" => c.size_bytes = num(v)?,
                "policy" => c.policy = v.to_string(),
                "stripe_unit" => c.stripe_unit_bytes = Some(num(v)?),
                "mean_request" => c.mean_request_bytes = Some(num(v)?),
                "iops" => c.iops = Some(real(v)?),
                "write_fraction" => c.write_fraction = Some(real(v)?),
                other => return Err(format!("unknown parameter {other:?}")),
            }
        }
        Ok(c)
    }

    pub fn to_query(&self) -> String {
        let mut q = format!(
            "name={}&size={}&policy={}",
            self.name, self.size_bytes, self.policy
        );
        if let Some(v) = self.stripe_unit_bytes {
            q.push_str(&format!("&stripe_unit={v}"));
        }
        if let Some(v) = self.mean_request_bytes {
            q.push_str(&format!("&mean_request={v}"));
        }
        if let Some(v) = self.iops {
            q.push_str(&format!("&iops={v}"));
        }
        if let Some(v) = self.write_fraction {
            q.push_str(&format!("&write_fraction={v}"));
        }
        q
    }
}

/// What a created volume got.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Created {
    pub name: String,
    pub policy: &'static str,
    pub arrays: Vec<usize>,
    pub stripe_unit_bytes: u64,
    pub reasons: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PoolStatus {
    pub generation: u64,
    pub uptime_s: f64,
    pub arrays: Vec<ArrayStatus>,
    pub volumes: Vec<VolumeStatus>,
    pub not_restriped: Vec<String>,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub errors: u64,
    pub parked_writes: u64,
    pub restripe_bytes: u64,
    pub restripe_batches: u64,
    pub restripes_finished: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ArrayStatus {
    pub index: usize,
    pub path: String,
    pub level: String,
    pub disks: usize,
    pub disk_bytes: u64,
    pub capacity_bytes: u64,
    /// Per-disk bytes not held by any volume or restripe target.
    pub free_disk_bytes: u64,
    pub emulate: Option<String>,
    /// Fraction of the time since the pool started with a request in flight on the array.
    pub utilization: f64,
    /// A member array's members, their states, the rebuild's progress.
    #[serde(default)]
    pub members: Option<super::MembersStatus>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VolumeStatus {
    pub name: String,
    pub size_bytes: u64,
    pub policy: String,
    pub stripe_unit_bytes: u64,
    pub chunk_units: u64,
    pub arrays: Vec<usize>,
    pub extents: Vec<ExtentRecord>,
    pub weighted_iops: Option<f64>,
    pub restripe: Option<RestripeStatus>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RestripeStatus {
    pub to_arrays: Vec<usize>,
    /// Volume bytes durably on the new layout.
    pub cursor_bytes: u64,
    pub fraction_done: f64,
    /// Copy rate since this process started it (or resumed it), bytes per second.
    pub rate_bytes_per_s: f64,
    pub eta_s: Option<f64>,
}

impl PoolServer {
    pub fn status(&self) -> PoolStatus {
        let devices: Vec<Arc<ArrayDev>> = self.devices();
        let inner = self.inner.lock().expect("pool lock");
        let up = self.started.elapsed().as_secs_f64().max(1e-9);
        let arrays = inner
            .layout
            .arrays
            .iter()
            .enumerate()
            .map(|(i, a)| ArrayStatus {
                index: i,
                path: if a.members.is_empty() {
                    a.path.clone()
                } else {
                    a.members.join(",")
                },
                level: a.level.clone(),
                disks: a.disks,
                disk_bytes: a.disk_bytes,
                capacity_bytes: inner.pool.lun_bytes(i),
                free_disk_bytes: inner.pool.free_disk_bytes(i),
                emulate: a.emulate.clone(),
                utilization: devices
                    .get(i)
                    .map_or(0.0, |d| d.busy_ns() as f64 / 1e9 / up),
                members: devices.get(i).and_then(|d| d.members()).map(|m| m.status()),
            })
            .collect();
        let volumes = inner
            .layout
            .volumes
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let id = cordillera_striping::VolumeId(i as u32);
                let restripe = v.restripe.as_ref().map(|r| {
                    let running = inner.restripes.get(&id);
                    let rate = running.map_or(0.0, |r| {
                        r.copied_this_run as f64 / r.started.elapsed().as_secs_f64().max(1e-3)
                    });
                    let left = v.size_bytes.saturating_sub(r.cursor) as f64;
                    RestripeStatus {
                        to_arrays: r.extents.iter().map(|e| e.array).collect(),
                        cursor_bytes: r.cursor,
                        fraction_done: r.cursor as f64 / v.size_bytes as f64,
                        rate_bytes_per_s: rate,
                        eta_s: (rate > 0.0).then(|| left / rate),
                    }
                });
                VolumeStatus {
                    name: v.name.clone(),
                    size_bytes: v.size_bytes,
                    policy: v.policy.clone(),
                    stripe_unit_bytes: v.stripe_unit_bytes,
                    chunk_units: v.chunk_units,
                    arrays: v.extents.iter().map(|e| e.array).collect(),
                    extents: v.extents.clone(),
                    weighted_iops: v.weighted_iops,
                    restripe,
                }
            })
            .collect();
        let c = &self.counters;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        PoolStatus {
            generation: inner.layout.generation,
            uptime_s: up,
            arrays,
            volumes,
            not_restriped: inner.not_restriped.clone(),
            reads: get(&c.reads),
            writes: get(&c.writes),
            read_bytes: get(&c.read_bytes),
            written_bytes: get(&c.written_bytes),
            errors: get(&c.errors),
            parked_writes: get(&c.parked_writes),
            restripe_bytes: get(&c.restripe_bytes),
            restripe_batches: get(&c.restripe_batches),
            restripes_finished: get(&c.restripes_finished),
        }
    }

    pub fn metrics(&self) -> String {
        let s = self.status();
        let mut out = String::new();
        let g = |out: &mut String, name: &str, help: &str, v: u64| http::gauge(out, name, help, v);
        g(
            &mut out,
            "cordillera_pool_arrays",
            "Arrays in the pool",
            s.arrays.len() as u64,
        );
        g(
            &mut out,
            "cordillera_pool_volumes",
            "Volumes in the pool",
            s.volumes.len() as u64,
        );
        g(
            &mut out,
            "cordillera_pool_reads_total",
            "Read requests served",
            s.reads,
        );
        g(
            &mut out,
            "cordillera_pool_writes_total",
            "Write requests served",
            s.writes,
        );
        g(
            &mut out,
            "cordillera_pool_read_bytes_total",
            "Bytes read",
            s.read_bytes,
        );
        g(
            &mut out,
            "cordillera_pool_written_bytes_total",
            "Bytes written",
            s.written_bytes,
        );
        g(
            &mut out,
            "cordillera_pool_errors_total",
            "Requests or copies that failed",
            s.errors,
        );
        g(
            &mut out,
            "cordillera_pool_parked_writes_total",
            "Writes that waited for a restripe batch",
            s.parked_writes,
        );
        g(
            &mut out,
            "cordillera_pool_restripe_bytes_total",
            "Bytes copied by restripes (cursor durable)",
            s.restripe_bytes,
        );
        g(
            &mut out,
            "cordillera_pool_restripes_active",
            "Volumes being restriped",
            s.volumes.iter().filter(|v| v.restripe.is_some()).count() as u64,
        );
        g(
            &mut out,
            "cordillera_pool_restripes_finished_total",
            "Restripes finished by this process",
            s.restripes_finished,
        );
        for a in &s.arrays {
            out.push_str(&format!(
                "cordillera_pool_array_utilization{{array=\"{}\"}} {:.4}\n",
                a.index, a.utilization
            ));
        }
        for v in &s.volumes {
            if let Some(r) = &v.restripe {
                out.push_str(&format!(
                    "cordillera_pool_restripe_fraction_done{{volume=\"{}\"}} {:.4}\n",
                    v.name, r.fraction_done
                ));
            }
        }
        out
    }

    /// Places and records a new volume.
    pub fn create_volume(&self, c: &CreateVolume) -> Result<Created, String> {
        if c.name.is_empty() || c.name.len() > 200 || c.name.contains(['/', '&', '=', ' ', '\0']) {
            return Err(format!(
                "volume name {:?}: 1 to 200 characters, none of / & = space",
                c.name
            ));
        }
        if let Some(w) = c.write_fraction {
            if !(0.0..=1.0).contains(&w) {
                return Err(format!("write fraction {w}: 0 to 1"));
            }
        }
        if c.iops.is_some_and(|x| !(x >= 0.0 && x.is_finite())) {
            return Err("iops must be a non-negative number".into());
        }
        let knowledge = Knowledge {
            mean_request_bytes: c.mean_request_bytes,
            large_requests: None,
            read_iops: c.iops.map(|i| i * (1.0 - c.write_fraction.unwrap_or(0.0))),
            write_iops: c.iops.map(|i| i * c.write_fraction.unwrap_or(0.0)),
        };
        let weighted = match (knowledge.read_iops, knowledge.write_iops) {
            (Some(r), Some(w)) => Some(policy::weighted_iops(r, w)),
            _ => None,
        };
        let mut reasons = Vec::new();
        let chosen = match c.policy.as_str() {
            "wide" => Policy::Wide,
            "narrow" => Policy::Narrow,
            "auto" => {
                let utilization = self
                    .status()
                    .arrays
                    .iter()
                    .map(|a| a.utilization)
                    .fold(0.0, f64::max);
                let r = policy::recommend(
                    &knowledge,
                    &Setting {
                        utilization: Some(utilization),
                        workload_known: c.iops.is_some() && c.mean_request_bytes.is_some(),
                        migration: false,
                        ..Setting::default()
                    },
                );
                reasons = r.reasons;
                r.policy
            }
            other => return Err(format!("policy {other:?}: wide, narrow or auto")),
        };
        let stripe_unit = c
            .stripe_unit_bytes
            .unwrap_or_else(|| policy::stripe_unit(&knowledge));
        if c.stripe_unit_bytes.is_none() && reasons.is_empty() {
            reasons.push(format!(
                "stripe unit {} KiB: {}",
                stripe_unit >> 10,
                if c.mean_request_bytes.is_some() {
                    "half the mean request, to the nearest power of two"
                } else {
                    "the paper's default for small requests (give --mean-request-bytes)"
                }
            ));
        }
        let created = {
            let mut inner = self.inner.lock().expect("pool lock");
            let n = inner.pool.arrays().len();
            let arrays: Vec<usize> = match chosen {
                Policy::Wide => (0..n).collect(),
                Policy::Narrow => {
                    // The least loaded array (declared write-weighted IOPS) that has room.
                    let mut load = vec![0.0; n];
                    for v in &inner.layout.volumes {
                        for e in &v.extents {
                            load[e.array] +=
                                v.weighted_iops.unwrap_or(0.0) / v.extents.len() as f64;
                        }
                    }
                    let fits: Vec<bool> = (0..n)
                        .map(|a| {
                            let need = inner.pool.extent_bytes(
                                c.size_bytes.max(512),
                                stripe_unit.max(512),
                                1,
                                &[a],
                            )[0];
                            inner
                                .pool
                                .free_ranges(a)
                                .iter()
                                .any(|(lo, hi)| hi - lo >= need)
                        })
                        .collect();
                    let free: Vec<u64> = (0..n).map(|a| inner.pool.free_disk_bytes(a)).collect();
                    let a = policy::least_loaded(&load, &free, &fits).ok_or_else(|| {
                        format!(
                            "no array has {} bytes free for volume {:?}",
                            c.size_bytes, c.name
                        )
                    })?;
                    reasons.push(format!(
                        "narrow on array {a}: the least loaded array with room (declared write-weighted IOPS {:.0})",
                        load[a]
                    ));
                    vec![a]
                }
            };
            let id = inner
                .pool
                .create(&c.name, c.size_bytes, stripe_unit, &arrays)
                .map_err(|e| e.to_string())?;
            let v = inner.pool.volume(id).expect("created").clone();
            debug_assert_eq!(id.0 as usize, inner.layout.volumes.len());
            inner.layout.volumes.push(VolumeRecord {
                name: v.name.clone(),
                size_bytes: v.size_bytes,
                stripe_unit_bytes: v.stripe_unit_bytes,
                chunk_units: v.chunk_units,
                policy: match chosen {
                    Policy::Wide => "wide",
                    Policy::Narrow => "narrow",
                }
                .into(),
                extents: v.extents.iter().map(ExtentRecord::of).collect(),
                restripe: None,
                weighted_iops: weighted,
            });
            Created {
                name: v.name,
                policy: match chosen {
                    Policy::Wide => "wide",
                    Policy::Narrow => "narrow",
                },
                arrays,
                stripe_unit_bytes: stripe_unit,
                reasons,
            }
        };
        self.save()?;
        Ok(created)
    }

    /// Adds an array (shaped like the first unless given) and starts restriping every wide
    /// volume onto it. Returns the volumes being restriped.
    pub fn add_array(
        &self,
        paths: &[std::path::PathBuf],
        disk_bytes: Option<u64>,
    ) -> Result<Vec<String>, String> {
        let first = {
            let inner = self.inner.lock().expect("pool lock");
            for a in &inner.layout.arrays {
                for p in std::iter::once(&a.path).chain(&a.members) {
                    if paths.iter().any(|q| Path::new(p) == q.as_path()) {
                        return Err(format!("{p} is already an array (or a member) of the pool"));
                    }
                }
            }
            inner.layout.arrays[0].clone()
        };
        let emulate = first
            .emulate
            .as_ref()
            .map(|e| e.split('@').next().unwrap_or(e).to_string());
        let new = NewArray {
            paths: paths.to_vec(),
            level: first.level.clone(),
            disks: if paths.len() > 1 {
                paths.len()
            } else {
                first.disks
            },
            disk_bytes: disk_bytes.unwrap_or(first.disk_bytes),
            unit_bytes: first.unit_bytes.unwrap_or(64 << 10),
            emulate,
        };
        let record = array_record(&new)?;
        let spec = ArraySpec {
            level: parse_level(&record.level)?,
            disks: record.disks,
            disk_bytes: record.disk_bytes,
        };
        let lun = spec.disk_bytes * spec.data_disks() as u64;
        if new.members() {
            let geometry = record.geometry()?.expect("a member array");
            super::members::MemberArray::create(paths, &geometry, record.member_array_id()?)?;
        } else {
            prepare_device(&paths[0], lun)?;
        }
        let index = self.arrays.lock().expect("arrays").len();
        let dev = super::open_array(index, &record, lun, false)?;
        let started = {
            let mut inner = self.inner.lock().expect("pool lock");
            inner.pool.add_array(spec).map_err(|e| e.to_string())?;
            inner.layout.arrays.push(record);
            self.arrays.lock().expect("arrays").push(Arc::new(dev));
            // Restripe records go into the layout with the array, cursors at 0. The copier may
            // start at once: every save writes the whole layout, so no cursor becomes durable
            // without these records, and bytes copied before the save below land in space the
            // old record holds free.
            self.start_restripes(&mut inner)
        };
        self.save()?;
        self.changed.notify_all();
        Ok(started)
    }
}

impl PoolStatus {
    /// `pool status` as a table: the arrays (and their members), the volumes (and any
    /// restripe), the request counts.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1 << 20) as f64);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "pool: generation {}, up {:.0} s",
            self.generation, self.uptime_s
        );
        let _ = writeln!(
            out,
            "{:<6} {:<7} {:>5} {:>12} {:>12} {:>7}  path",
            "array", "level", "disks", "capacity", "free/disk", "util"
        );
        for x in &self.arrays {
            let _ = writeln!(
                out,
                "{:<6} {:<7} {:>5} {:>12} {:>12} {:>6.1}%  {}{}",
                x.index,
                x.level,
                x.disks,
                mib(x.capacity_bytes),
                mib(x.free_disk_bytes),
                x.utilization * 100.0,
                x.path,
                x.emulate
                    .as_deref()
                    .map(|e| format!(" (emulated {e})"))
                    .unwrap_or_default()
            );
            if let Some(m) = &x.members {
                let _ = writeln!(
                    out,
                    "       {}: {} device errors, {} degraded reads, {} degraded writes, {} dirty regions",
                    if m.degraded { "DEGRADED" } else { "whole" },
                    m.device_errors,
                    m.degraded_reads,
                    m.degraded_writes,
                    m.dirty_regions
                );
                for (i, d) in m.members.iter().enumerate() {
                    let progress = d
                        .rebuilt_rows
                        .map(|r| format!(" ({r}/{} rows)", m.rows))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "       member {i}: {:<10}{progress} {}",
                        d.state, d.path
                    );
                }
            }
        }
        let _ = writeln!(
            out,
            "{:<16} {:>12} {:<7} {:>8} {:<12} restripe",
            "volume", "size", "policy", "unit", "arrays"
        );
        for v in &self.volumes {
            let restripe = match &v.restripe {
                None => "-".to_string(),
                Some(r) => format!(
                    "to {:?}: {:.1} % ({}, {:.1} MB/s{})",
                    r.to_arrays,
                    r.fraction_done * 100.0,
                    mib(r.cursor_bytes),
                    r.rate_bytes_per_s / 1e6,
                    r.eta_s
                        .map(|e| format!(", ~{e:.0} s left"))
                        .unwrap_or_default()
                ),
            };
            let _ = writeln!(
                out,
                "{:<16} {:>12} {:<7} {:>7}K {:<12} {}",
                v.name,
                mib(v.size_bytes),
                v.policy,
                v.stripe_unit_bytes >> 10,
                format!("{:?}", v.arrays),
                restripe
            );
        }
        for w in &self.not_restriped {
            let _ = writeln!(out, "note: {w}");
        }
        let _ = writeln!(
                    out,
            "requests: {} reads, {} writes ({} waited for a restripe batch), {} errors; restriped {} in {} batches",
            self.reads,
            self.writes,
            self.parked_writes,
            self.errors,
            mib(self.restripe_bytes),
            self.restripe_batches
        );
        out
    }
}
