//! Real-time disk emulation: a fast file takes, in wall-clock time, as long as a modeled device
//! would. Every operation is given to the simulator's device model (the same calibrated models
//! the lab uses) when it arrives; it is carried out on the real file at once and completes when
//! both the real operation and the model's service of it are done.
//!
//! # How faithful it is
//!
//! - The model sees the real arrival times and queue, so queueing, seek and rotational
//!   positioning and the scheduler (SPTF for the mechanical presets) are the model's.
//! - The emulator only adds time: where the real file is slower than the model, the real file
//!   sets the pace. Put the file on fast storage (tmpfs or an SSD) for the model to dominate.
//! - Wake-ups come from a thread sleeping until the model's next event; on an idle machine they
//!   are late by tens of microseconds, small beside a disk's milliseconds.
//! - Offsets are the file's: a file smaller than the device uses the start of its platters
//!   (short seeks), as a partition there would.
//! - The models have no volatile write cache (`cheetah-15k`): a write the model has completed is
//!   durable, so a flush adds nothing to the modeled time (the real file is still flushed).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use cordillera_models::device::{Completion, Device, IoRequest};
use cordillera_models::presets::{build, ArraySpec};
use cordillera_types::Op;

/// Which device to emulate: a preset, optionally an array of them (`cheetah-15k`,
/// `cheetah-15k@raid0:4`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulateSpec {
    pub preset: String,
    pub array: Option<ArraySpec>,
}

impl std::str::FromStr for EmulateSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<EmulateSpec, String> {
        let (preset, array) = match s.split_once('@') {
            Some((p, a)) => (p, Some(a.parse::<ArraySpec>()?)),
            None => (s, None),
        };
        // Build once here so that a bad name is reported when the flag is parsed.
        build(preset, array)?;
        Ok(EmulateSpec {
            preset: preset.to_string(),
            array,
        })
    }
}

enum Message {
    Submit {
        op: Op,
        offset_bytes: u64,
        length_bytes: u64,
        done: mpsc::SyncSender<()>,
        /// The submitting user's count of its operations in the model.
        own: Arc<AtomicUsize>,
    },
}

/// A device model running in real time on its own thread. A clone (or a [`Emulator::region`])
/// shares the same model: two files on one modeled disk contend for its head and queue.
#[derive(Clone, Debug)]
pub struct Emulator {
    sender: mpsc::Sender<Message>,
    capacity_bytes: u64,
    /// Operations submitted to the model and not yet completed, from every user of it.
    queued: Arc<AtomicUsize>,
    /// Of those, this user's (a region's: clones share it).
    own: Arc<AtomicUsize>,
    /// Where this user's offset 0 lies on the device (a partition's start).
    offset_bytes: u64,
}

/// An operation the model is serving; [`Ticket::wait`] returns when it has.
#[must_use]
pub struct Ticket(Option<mpsc::Receiver<()>>);

impl Ticket {
    /// Blocks until the model has completed the operation.
    pub fn wait(self) {
        if let Some(r) = self.0 {
            let _ = r.recv();
        }
    }
}

impl Emulator {
    pub fn start(spec: &EmulateSpec) -> Result<Emulator, String> {
        let capacity_bytes = build(&spec.preset, spec.array)?.capacity_bytes();
        let (sender, receiver) = mpsc::channel::<Message>();
        let spec = spec.clone();
        let queued = Arc::new(AtomicUsize::new(0));
        let completed = queued.clone();
        thread::Builder::new()
            .name("emulator".into())
            .spawn(move || {
                let device = build(&spec.preset, spec.array).expect("built before");
                run(device, receiver, &completed);
            })
            .map_err(|e| format!("cannot start the emulator thread: {e}"))?;
        Ok(Emulator {
            sender,
            capacity_bytes,
            queued,
            own: Arc::new(AtomicUsize::new(0)),
            offset_bytes: 0,
        })
    }

    /// The same device for another user whose offsets start at `offset_bytes` on it (a
    /// partition): operations of both go through one model, in arrival order.
    pub fn region(&self, offset_bytes: u64) -> Emulator {
        Emulator {
            offset_bytes: offset_bytes % self.capacity_bytes,
            own: Arc::new(AtomicUsize::new(0)),
            ..self.clone()
        }
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// The device's queue: operations of every user of the model (every region) submitted and
    /// not yet completed. A store on a partition of a busy volume's disk reports it as its load.
    pub fn queue_depth(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// The device's queue less this user's operations: the other regions' (a store on a
    /// partition of a volume's disk: the volume's load).
    pub fn others_queue_depth(&self) -> usize {
        self.queue_depth()
            .saturating_sub(self.own.load(Ordering::Relaxed))
    }

    /// An operation arrives now. Offsets beyond the model's capacity wrap around it.
    pub fn begin(&self, op: Op, offset_bytes: u64, length_bytes: u64) -> Ticket {
        if length_bytes == 0 {
            return Ticket(None);
        }
        let length_bytes = length_bytes.min(self.capacity_bytes);
        let offset_bytes =
            (offset_bytes + self.offset_bytes) % (self.capacity_bytes - length_bytes + 1) / 512
                * 512;
        let (done, receiver) = mpsc::sync_channel(1);
        let message = Message::Submit {
            op,
            offset_bytes,
            length_bytes,
            done,
            own: self.own.clone(),
        };
        self.queued.fetch_add(1, Ordering::Relaxed);
        self.own.fetch_add(1, Ordering::Relaxed);
        match self.sender.send(message) {
            Ok(()) => Ticket(Some(receiver)),
            Err(_) => {
                self.queued.fetch_sub(1, Ordering::Relaxed);
                self.own.fetch_sub(1, Ordering::Relaxed);
                Ticket(None)
            }
        }
    }
}

fn run(mut device: Box<dyn Device>, receiver: mpsc::Receiver<Message>, queued: &AtomicUsize) {
    let started = Instant::now();
    let now = || started.elapsed().as_nanos() as u64;
    let mut waiting: HashMap<u64, (mpsc::SyncSender<()>, Arc<AtomicUsize>)> = HashMap::new();
    let mut next_id = 0u64;
    let mut completions: Vec<Completion> = Vec::new();
    loop {
        let message = match device.poll_timeout() {
            None => match receiver.recv() {
                Ok(m) => Some(m),
                Err(_) => return,
            },
            Some(at) => {
                let wait = Duration::from_nanos(at.saturating_sub(now()));
                match receiver.recv_timeout(wait) {
                    Ok(m) => Some(m),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        };
        // Events due by now first, so that the model's clock never goes back.
        let t = now();
        device.advance(t, &mut completions);
        for c in completions.drain(..) {
            if let Some((done, own)) = waiting.remove(&c.id) {
                queued.fetch_sub(1, Ordering::Relaxed);
                own.fetch_sub(1, Ordering::Relaxed);
                let _ = done.send(());
            }
        }
        if let Some(Message::Submit {
            op,
            offset_bytes,
            length_bytes,
            done,
            own,
        }) = message
        {
            next_id += 1;
            waiting.insert(next_id, (done, own));
            device.submit(
                t,
                IoRequest {
                    id: next_id,
                    op,
                    offset_bytes,
                    length_bytes,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_names_are_refused() {
        let s: EmulateSpec = "cheetah-15k".parse().unwrap();
        assert_eq!(s.preset, "cheetah-15k");
        assert!(s.array.is_none());
        let s: EmulateSpec = "cheetah-15k@raid0:4".parse().unwrap();
        assert_eq!(s.array.unwrap().disks, 4);
        assert!("floppy".parse::<EmulateSpec>().is_err());
        assert!("cheetah-15k@raid9:2".parse::<EmulateSpec>().is_err());
    }

    /// Two regions of one model share its queue: operations of both count until completed.
    #[test]
    fn regions_share_the_device_queue() {
        let e = Emulator::start(&"cheetah-15k".parse().unwrap()).unwrap();
        let other = e.region(e.capacity_bytes() / 2);
        assert_eq!(e.queue_depth(), 0);
        let tickets: Vec<Ticket> = (0..8)
            .map(|i| {
                let at = i * (1 << 30);
                if i % 2 == 0 {
                    e.begin(Op::Read, at, 4096)
                } else {
                    other.begin(Op::Write, at, 4096)
                }
            })
            .collect();
        let depth = other.queue_depth();
        // Eight random operations take tens of milliseconds on the model: most still queued.
        assert!(
            (2..=8).contains(&depth),
            "depth {depth} just after 8 submissions"
        );
        // Each region sees the other's part of the queue: four each were submitted, and an
        // operation leaves both counts when it completes.
        let (mine, theirs) = (e.others_queue_depth(), other.others_queue_depth());
        assert!(mine <= 4 && theirs <= 4, "{mine} and {theirs} of 4 each");
        assert_eq!(mine + theirs, other.queue_depth(), "the two parts add up");
        for t in tickets {
            t.wait();
        }
        // Counted down before the waiter is woken.
        assert_eq!(e.queue_depth(), 0, "completed operations still counted");
        assert_eq!(e.others_queue_depth() + other.others_queue_depth(), 0);
    }

    /// Random 4 KiB reads one at a time on an emulated 15k RPM disk take milliseconds each
    /// (seek plus half a rotation of 4 ms), where the real memory costs nothing.
    #[test]
    fn random_reads_take_a_disk_s_time() {
        let e = Emulator::start(&"cheetah-15k".parse().unwrap()).unwrap();
        let started = Instant::now();
        let mut x = 12345u64;
        for _ in 0..50 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let offset = (x >> 20) % (e.capacity_bytes() / 4096) * 4096;
            e.begin(Op::Read, offset, 4096).wait();
        }
        let per_op = started.elapsed().as_secs_f64() / 50.0 * 1e3;
        // The model's mean is about 3.5 ms seek + 2 ms rotation: never less than 3 ms (a late
        // wake-up on a busy machine only adds time).
        assert!((3.0..100.0).contains(&per_op), "{per_op:.2} ms per read");
    }
}
