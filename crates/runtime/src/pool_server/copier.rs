//! The restripe on real I/O: the copier thread (one batch at a time: read the old layout,
//! write and sync the new, then make the cursor durable in the layout record), starting
//! restripes when an array is added, and switching a volume to its new layout when done. What
//! may be copied and when a request waits is the core's (`cordillera_striping::restripe`).

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cordillera_striping::layout::RestripeRecord;
use cordillera_striping::pool::{segments_of, VolumeId};
use cordillera_striping::restripe::{NextBatch, Restripe};

use super::{Inner, PoolServer, Running};

impl PoolServer {
    /// The restripe thread: one batch at a time, over every volume being restriped.
    pub(super) fn copier(self: Arc<Self>) {
        let mut buffer = Vec::new();
        loop {
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            let mut inner = self.inner.lock().expect("pool lock");
            let ids: Vec<VolumeId> = inner.restripes.keys().copied().collect();
            let mut work = None;
            let mut finish = None;
            for id in ids {
                let r = inner.restripes.get_mut(&id).expect("listed");
                match r.core.next_batch() {
                    NextBatch::Copy { lo, hi } => {
                        work = Some((id, lo, hi));
                        break;
                    }
                    NextBatch::Complete if r.core.old_idle() => {
                        finish = Some(id);
                        break;
                    }
                    _ => {}
                }
            }
            if let Some(id) = finish {
                if let Err(e) = self.finish(inner, id) {
                    tracing::error!(error = %e, "finishing a restripe");
                    std::thread::sleep(Duration::from_secs(1));
                }
                self.release_parked();
                continue;
            }
            let Some((id, lo, hi)) = work else {
                // Nothing to copy now: wait for a request to finish or a restripe to start.
                let _unused = self
                    .changed
                    .wait_timeout(inner, Duration::from_millis(200))
                    .expect("pool lock");
                continue;
            };
            let (mut from, mut to) = (Vec::new(), Vec::new());
            let v_old = inner.pool.volume(id).expect("restriped volume");
            let v_new = inner.pool.restripe_target(id).expect("its target");
            let mapped = segments_of(v_old, &|a| inner.pool.data_disks(a), lo, hi - lo, &mut from)
                .and_then(|()| {
                    segments_of(v_new, &|a| inner.pool.data_disks(a), lo, hi - lo, &mut to)
                });
            drop(inner);
            let started = Instant::now();
            buffer.resize((hi - lo) as usize, 0);
            let copied = mapped
                .map_err(|e| io::Error::other(e.to_string()))
                .and_then(|()| {
                    self.read_segments(&from, &mut buffer, lo)?;
                    self.write_segments(&to, &buffer, lo, true)
                });
            if let Err(e) = copied {
                tracing::error!(error = %e, lo, hi, "restripe batch failed; retrying in 1 s");
                self.inner
                    .lock()
                    .expect("pool lock")
                    .restripes
                    .get_mut(&id)
                    .expect("running")
                    .core
                    .abandon_batch();
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
            // The new layout holds the batch durably: now the cursor.
            let cursor = {
                let mut inner = self.inner.lock().expect("pool lock");
                let cursor = inner
                    .restripes
                    .get_mut(&id)
                    .expect("running")
                    .core
                    .copied(lo, hi);
                let v = &mut inner.layout.volumes[id.0 as usize];
                v.restripe.as_mut().expect("a restripe record").cursor = cursor;
                cursor
            };
            // Until the cursor is durable, writes to the batch keep waiting; a save that fails
            // (a full or failing disk) is tried again.
            while let Err(e) = self.save() {
                tracing::error!(error = %e, "saving the restripe cursor; retrying in 1 s");
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                if self.stopping.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            {
                let mut inner = self.inner.lock().expect("pool lock");
                let r = inner.restripes.get_mut(&id).expect("running");
                r.core.persisted(cursor);
                r.copied_this_run += hi - lo;
            }
            self.counters
                .restripe_bytes
                .fetch_add(hi - lo, Ordering::Relaxed);
            self.counters
                .restripe_batches
                .fetch_add(1, Ordering::Relaxed);
            self.release_parked();
            // The rate bound: a batch of b bytes takes at least b / rate seconds.
            if let Some(rate) = self.options.restripe_rate {
                let least = Duration::from_secs_f64((hi - lo) as f64 / rate as f64);
                if let Some(rest) = least.checked_sub(started.elapsed()) {
                    std::thread::sleep(rest);
                }
            }
        }
    }

    /// Switches a fully copied volume to its new layout (durably), then frees the old.
    pub(super) fn finish(
        &self,
        mut inner: std::sync::MutexGuard<'_, Inner>,
        id: VolumeId,
    ) -> Result<(), String> {
        let target = inner
            .pool
            .restripe_target(id)
            .expect("a restripe target")
            .clone();
        {
            let v = &mut inner.layout.volumes[id.0 as usize];
            v.extents = target
                .extents
                .iter()
                .map(cordillera_striping::layout::ExtentRecord::of)
                .collect();
            v.chunk_units = target.chunk_units;
            v.restripe = None;
        }
        inner.pool.finish_restripe(id).map_err(|e| e.to_string())?;
        let name = target.name.clone();
        inner.restripes.remove(&id);
        drop(inner);
        self.save()?;
        self.counters
            .restripes_finished
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(volume = %name, "restripe finished");
        Ok(())
    }

    /// Starts restriping wide volumes onto every array (after one was added); the layout
    /// record holds each restripe's target before any byte is copied.
    pub(super) fn start_restripes(&self, inner: &mut Inner) -> Vec<String> {
        let all: Vec<usize> = (0..inner.pool.arrays().len()).collect();
        let mut started = Vec::new();
        inner.not_restriped.clear();
        for i in 0..inner.layout.volumes.len() {
            let id = VolumeId(i as u32);
            let v = &inner.layout.volumes[i];
            if v.policy != "wide" || v.restripe.is_some() || v.extents.len() == all.len() {
                continue;
            }
            let (name, chunk) = (v.name.clone(), v.chunk_units);
            match inner.pool.begin_restripe(id, &all, chunk) {
                Ok(target) => {
                    let record = RestripeRecord {
                        chunk_units: chunk,
                        extents: target
                            .extents
                            .iter()
                            .map(cordillera_striping::layout::ExtentRecord::of)
                            .collect(),
                        cursor: 0,
                    };
                    let size = target.size_bytes;
                    inner.layout.volumes[i].restripe = Some(record);
                    inner.next_epoch += 1;
                    let epoch = inner.next_epoch;
                    // Requests admitted before it and still in flight: no batch is copied
                    // until those writes have landed.
                    let mut core = Restripe::new(size, self.options.batch_bytes, 0);
                    let (writes, reads) = inner.before.get(&id).copied().unwrap_or_default();
                    core.in_flight_before(writes, reads);
                    inner.restripes.insert(
                        id,
                        Running {
                            core,
                            epoch,
                            started: Instant::now(),
                            copied_this_run: 0,
                        },
                    );
                    started.push(name);
                }
                Err(e) => inner
                    .not_restriped
                    .push(format!("{name}: not restriped: {e}")),
            }
        }
        started
    }
}
