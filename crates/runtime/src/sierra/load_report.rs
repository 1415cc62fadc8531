//! A chunk server's I/O second by second, for the MDS's gear scheduler (§3.4: "the load is
//! measured at 1 sec intervals on each chunk server"): each client read and write it receives,
//! classified random or sequential within its chunk group ([`SequentialDetector`]), counted in
//! its Unix second, and sent to the MDS once the second is over ([`Frame::Load`]).
//!
//! Only client requests count: a write's copies to the secondaries are the `r` the load metric
//! weights writes by. A request refused (sent to a server no longer primary) is counted where it
//! arrived; the client's retry counts again — rare, around a migration. While the MDS cannot be
//! reached the seconds wait, up to [`SECONDS_KEPT`]; older ones are dropped and the MDS counts
//! them as idle.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use cordillera_gears::learned::ServerSecond;
use cordillera_gears::load::SequentialDetector;
use cordillera_gears::protocol::Message;
use cordillera_trace::VolumeId;
use cordillera_types::Op;
use cordillera_wire::sierra::Frame;

/// Seconds kept for the MDS while it cannot be reached.
pub const SECONDS_KEPT: usize = 600;

/// Seconds sent in one frame at most.
const SECONDS_PER_FRAME: usize = 120;

#[derive(Default)]
pub struct LoadCounter {
    detector: SequentialDetector,
    seconds: BTreeMap<u64, ServerSecond>,
    dropped: u64,
}

pub fn unix_second() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl LoadCounter {
    /// Counts `m` if it is a client's read or write.
    pub fn observe(&mut self, second: u64, m: &Message) {
        let (op, group, offset, length) = match m {
            Message::Read {
                group,
                offset_bytes,
                length_bytes,
                ..
            } => (Op::Read, group, *offset_bytes, *length_bytes),
            Message::Write {
                group,
                offset_bytes,
                data,
                ..
            } => (Op::Write, group, *offset_bytes, data.len() as u64),
            _ => return,
        };
        let sequential = self
            .detector
            .classify(VolumeId(group.0), op, offset, length);
        let s = self.seconds.entry(second).or_default();
        s.requests = s.requests.saturating_add(1);
        match (op, sequential) {
            (Op::Read, false) => s.random_reads = s.random_reads.saturating_add(1),
            (Op::Write, false) => s.random_writes = s.random_writes.saturating_add(1),
            (Op::Read, true) => s.sequential_read_bytes += length,
            (Op::Write, true) => s.sequential_write_bytes += length,
        }
        match op {
            Op::Read => s.read_bytes += length,
            Op::Write => s.write_bytes += length,
        }
        while self.seconds.len() > SECONDS_KEPT {
            self.seconds.pop_first();
            self.dropped += 1;
        }
    }

    /// The seconds before `now_second` not yet sent, as frames (none when there are none).
    pub fn take_finished(&mut self, now_second: u64) -> Vec<Frame> {
        let rest = self.seconds.split_off(&now_second);
        let done = std::mem::replace(&mut self.seconds, rest);
        let done: Vec<(u64, ServerSecond)> = done.into_iter().collect();
        done.chunks(SECONDS_PER_FRAME)
            .map(|c| Frame::Load(c.to_vec()))
            .collect()
    }

    /// Seconds dropped because they waited too long.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_gears::model::GroupId;

    fn read(group: u32, offset: u64, len: u64) -> Message {
        Message::Read {
            id: 0,
            piece: 0,
            group: GroupId(group),
            offset_bytes: offset,
            length_bytes: len,
        }
    }

    #[test]
    fn reads_and_writes_count_in_their_second_random_or_sequential() {
        let mut c = LoadCounter::default();
        c.observe(10, &read(1, 0, 4096));
        // Continues the stream in group 1: sequential.
        c.observe(10, &read(1, 4096, 4096));
        // Another group: random.
        c.observe(10, &read(2, 4096, 4096));
        c.observe(
            11,
            &Message::Write {
                id: 1,
                piece: 1,
                group: GroupId(1),
                epoch: 1,
                offset_bytes: 1 << 30,
                data: vec![0; 512],
            },
        );
        // Second 11 is not over at 11.
        let frames = c.take_finished(11);
        let Frame::Load(seconds) = &frames[0] else {
            panic!("{frames:?}")
        };
        assert_eq!(seconds.len(), 1);
        let (second, s) = seconds[0];
        assert_eq!(second, 10);
        assert_eq!(
            (
                s.random_reads,
                s.sequential_read_bytes,
                s.requests,
                s.read_bytes
            ),
            (2, 4096, 3, 3 * 4096)
        );
        let frames = c.take_finished(12);
        let Frame::Load(seconds) = &frames[0] else {
            panic!()
        };
        assert_eq!(seconds[0].1.random_writes, 1);
        assert!(c.take_finished(100).is_empty());
    }

    #[test]
    fn seconds_waiting_too_long_are_dropped() {
        let mut c = LoadCounter::default();
        for s in 0..SECONDS_KEPT as u64 + 5 {
            c.observe(s, &read(1, s * 1_000_000, 4096));
        }
        assert_eq!(c.dropped(), 5);
        let frames = c.take_finished(u64::MAX);
        let sent: usize = frames
            .iter()
            .map(|f| match f {
                Frame::Load(s) => s.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(sent, SECONDS_KEPT);
    }
}
