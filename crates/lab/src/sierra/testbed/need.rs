//! Table 2's top half from the trace and the schedule: what the loggers take in below the top
//! gear and what they must still hold at each up-shift.

use cordillera_trace::Record;
use cordillera_types::Op;

use super::ReclaimNeed;

/// Unique bytes written in each stretch below the top gear (4 KiB blocks): what the loggers
/// must hold at each up-shift (Table 2).
pub(super) struct NeedMeter {
    pub(super) written: Vec<Vec<u64>>,
    pub(super) written_total: u64,
    pub(super) trace_written: u64,
    pub(super) trace_read: u64,
    pub(super) stretch_bytes: u64,
    pub(super) stretches: Vec<(i64, u64)>,
    pub(super) in_stretch: bool,
}

impl NeedMeter {
    const BLOCK: u64 = 4096;

    pub(super) fn add(&mut self, hour: i64, low: bool, r: &Record) {
        match r.op {
            Op::Write => self.trace_written += r.length_bytes,
            Op::Read => self.trace_read += r.length_bytes,
        }
        if !low {
            if self.in_stretch {
                self.stretches.push((hour, self.stretch_bytes));
                self.stretch_bytes = 0;
                self.written.iter_mut().for_each(|w| w.clear());
                self.in_stretch = false;
            }
            return;
        }
        self.in_stretch = true;
        if r.op != Op::Write || r.length_bytes == 0 {
            return;
        }
        self.written_total += r.length_bytes;
        let v = r.volume.index();
        if self.written.len() <= v {
            self.written.resize_with(v + 1, Vec::new);
        }
        let bits = &mut self.written[v];
        let end = r.offset_bytes.saturating_add(r.length_bytes);
        for b in r.offset_bytes / Self::BLOCK..end.div_ceil(Self::BLOCK) {
            let (word, bit) = ((b / 64) as usize, b % 64);
            if bits.len() <= word {
                bits.resize(word + 1, 0);
            }
            if bits[word] & (1 << bit) == 0 {
                bits[word] |= 1 << bit;
                self.stretch_bytes += Self::BLOCK;
            }
        }
    }

    pub(super) fn finish(self, hours_in_top_gear: usize) -> ReclaimNeed {
        let total: u64 = self.stretches.iter().map(|s| s.1).sum::<u64>() + self.stretch_bytes;
        let largest = self.stretches.iter().max_by_key(|s| s.1).copied();
        ReclaimNeed {
            logged_bytes_total: total,
            written_bytes_total: self.written_total,
            trace_written_bytes: self.trace_written,
            trace_read_bytes: self.trace_read,
            hours_in_top_gear,
            required_mb_per_s: if hours_in_top_gear == 0 {
                0.0
            } else {
                total as f64 / 1e6 / (hours_in_top_gear as f64 * 3600.0)
            },
            largest_bytes: largest.map_or(0, |s| s.1),
            largest_upshift_hour: largest.map(|s| s.0),
        }
    }
}
