//! Repairing member arrays while they serve: a lost member replaced by a new disk
//! (`replace_member`), rebuilt row by row by the rebuild thread at a bounded rate with a
//! durable cursor (a restart resumes it), and scrubs that check and repair parity and copies.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cordillera_striping::members::array::ScrubReport;

use super::PoolServer;

/// Rows the rebuild thread copies per step (each step ends synced, its cursor durable).
const REBUILD_ROWS: u64 = 64;

impl PoolServer {
    /// Puts the device at `path` (created sparse if missing) in place of failed member
    /// `member` of member array `array`; the rebuild thread then rebuilds it. The pool's
    /// layout names the new device first, so a restart opens it (blank until labelled: it is
    /// then failed again, and the command is run again).
    pub fn replace_member(&self, array: usize, member: usize, path: &Path) -> Result<(), String> {
        let dev = self.member_array(array)?;
        let members = dev.members().expect("a member array");
        let abs = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let utf8 = abs
            .to_str()
            .ok_or(format!("{}: not a UTF-8 path", abs.display()))?;
        {
            let mut inner = self.inner.lock().expect("pool lock");
            let record = &mut inner.layout.arrays[array];
            if member >= record.members.len() {
                return Err(format!(
                    "array {array} has {} members",
                    record.members.len()
                ));
            }
            if record
                .members
                .iter()
                .enumerate()
                .any(|(i, p)| i != member && p == utf8)
            {
                return Err(format!("{utf8} is already a member of array {array}"));
            }
            if !members.is_failed(member) {
                return Err(format!("member {member} of array {array} is not failed"));
            }
            record.members[member] = utf8.to_string();
        }
        self.save()?;
        members.replace(member, &abs)?;
        tracing::info!(array, member, device = %abs.display(), "member replaced; rebuilding");
        self.changed.notify_all();
        Ok(())
    }

    /// Array `array`, if it is a member array.
    fn member_array(&self, array: usize) -> Result<Arc<super::ArrayDev>, String> {
        let dev = self
            .devices()
            .get(array)
            .cloned()
            .ok_or(format!("no array {array}"))?;
        match dev.members() {
            Some(_) => Ok(dev),
            None => Err(format!("array {array} is not a member array")),
        }
    }

    /// Checks every row of member array `array` (`repair`: rewrites what differs).
    pub fn scrub(&self, array: usize, repair: bool) -> Result<ScrubReport, String> {
        let dev = self.member_array(array)?;
        let members = dev.members().expect("a member array");
        let report = members.scrub(repair)?;
        self.counters
            .scrubbed_rows
            .fetch_add(report.rows, Ordering::Relaxed);
        Ok(report)
    }

    /// The rebuild thread: replacements rebuilt step by step, at most `rate` bytes per second.
    pub(super) fn rebuilder(self: Arc<Self>) {
        let rate = self.options.restripe_rate;
        while !self.stopping.load(Ordering::SeqCst) {
            let mut worked = false;
            for (i, dev) in self.devices().iter().enumerate() {
                let Some(m) = dev.members() else { continue };
                if m.rebuilding().is_none() {
                    continue;
                }
                let started = Instant::now();
                match m.rebuild_step(REBUILD_ROWS) {
                    Ok(_) => worked = true,
                    Err(e) => {
                        tracing::error!(array = i, error = %e, "rebuild step failed");
                        eprintln!("cordillera pool array {i}: rebuild: {e}");
                        std::thread::sleep(Duration::from_secs(1));
                    }
                }
                if let Some(rate) = rate {
                    let bytes = REBUILD_ROWS * m.unit() * m.width() as u64;
                    let due = Duration::from_secs_f64(bytes as f64 / rate as f64);
                    if let Some(rest) = due.checked_sub(started.elapsed()) {
                        std::thread::sleep(rest);
                    }
                }
            }
            if !worked {
                let inner = self.inner.lock().expect("pool lock");
                let _ = self
                    .changed
                    .wait_timeout(inner, Duration::from_millis(500))
                    .expect("pool lock");
            }
        }
    }
}
