//! A file or block device for the store core. Operations run on worker threads so that
//! concurrent writes reach the device concurrently; a flush is `fdatasync`, which makes every
//! write completed before it durable — exactly the core's contract.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

use cordillera_vstore::store::{DiskDone, DiskOp, Store};

/// Worker threads: enough to keep a device's queue busy with the store's concurrent records.
pub const DISK_WORKERS: usize = 8;

/// A disk shared by worker threads; completions (or I/O errors) come back on a channel.
pub struct Disk {
    jobs: mpsc::Sender<DiskOp>,
    workers: Vec<thread::JoinHandle<()>>,
}

/// A disk operation that failed: the store cannot continue safely.
#[derive(Debug)]
pub struct DiskError {
    pub op: &'static str,
    pub error: std::io::Error,
}

impl Disk {
    /// Starts the workers; each completion is passed to `done`.
    pub fn start(
        file: File,
        done: impl Fn(Result<DiskDone, DiskError>) + Send + Sync + 'static,
    ) -> Disk {
        let file = Arc::new(file);
        let (jobs, receiver) = mpsc::channel::<DiskOp>();
        let receiver = Arc::new(Mutex::new(receiver));
        let done = Arc::new(done);
        let workers = (0..DISK_WORKERS)
            .map(|_| {
                let (file, receiver, done) = (file.clone(), receiver.clone(), done.clone());
                thread::spawn(move || loop {
                    let job = receiver.lock().expect("disk queue").recv();
                    let Ok(op) = job else { return };
                    done(execute(&file, op));
                })
            })
            .collect();
        Disk { jobs, workers }
    }

    pub fn submit(&self, op: DiskOp) {
        // The workers outlive every submitter (they stop when the sender is dropped).
        let _ = self.jobs.send(op);
    }

    /// Stops the workers after the queued operations.
    pub fn stop(self) {
        drop(self.jobs);
        for w in self.workers {
            let _ = w.join();
        }
    }
}

/// Runs one operation.
pub fn execute(file: &File, op: DiskOp) -> Result<DiskDone, DiskError> {
    match op {
        DiskOp::Read {
            id,
            offset_bytes,
            length_bytes,
        } => {
            let mut data = vec![0u8; length_bytes as usize];
            let mut filled = 0;
            while filled < data.len() {
                match file.read_at(&mut data[filled..], offset_bytes + filled as u64) {
                    // Past the end of a file reads as zeros (never written).
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(error) => return Err(DiskError { op: "read", error }),
                }
            }
            Ok(DiskDone::Read { id, data })
        }
        DiskOp::Write {
            id,
            offset_bytes,
            data,
        } => {
            file.write_all_at(&data, offset_bytes)
                .map_err(|error| DiskError { op: "write", error })?;
            Ok(DiskDone::Written { id })
        }
        DiskOp::Flush { id } => {
            file.sync_data().map_err(|error| DiskError {
                op: "fdatasync",
                error,
            })?;
            Ok(DiskDone::Flushed { id })
        }
    }
}

/// Drives `store` synchronously until it asks for nothing more: for formatting and offline
/// inspection.
pub fn run_to_quiet(store: &mut Store, file: &File, now: u64) -> Result<(), DiskError> {
    while let Some(op) = store.poll_disk() {
        let done = execute(file, op)?;
        store.handle_disk(now, done);
    }
    Ok(())
}

/// Asks the kernel to drop `file`'s cached pages (after writing them back), so the next reads
/// come from the device: `fdatasync` then `posix_fadvise(DONTNEED)`.
pub fn drop_cached_pages(file: &File) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    file.sync_data()?;
    // SAFETY: a valid descriptor and a whole-file range; the call only changes cache state.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}
