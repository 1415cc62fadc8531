//! A device that fails on demand: a file served by nbdkit through its `error` filter and
//! mounted as a file by nbdfuse.

use std::io;
use std::thread;
use std::time::Duration;

/// A device under nbdkit's `error` filter, mounted as a file by nbdfuse: every I/O passes until
/// its trigger file exists, then fails as the filter's parameters say (`error-rate=100%`:
/// every I/O; `error-pwrite=EIO error-pwrite-rate=20%`: a fifth of the writes). Parameters of
/// nbdkit's `delay` filter (`delay-write=5ms`, `rdelay=…`) add that filter: every such I/O
/// takes that long. A latency spike on demand: [`FaultyDevice::stall_for`] stops nbdkit
/// (SIGSTOP) and continues it later. Needs nbdkit, nbdfuse and FUSE
/// ([`FaultyDevice::available`]).
pub struct FaultyDevice {
    nbdkit: std::process::Child,
    fuse: std::process::Child,
    mnt: std::path::PathBuf,
    trigger: std::path::PathBuf,
}

impl FaultyDevice {
    /// Whether nbdkit, nbdfuse and FUSE are here.
    pub fn available() -> bool {
        let have = |t: &str| {
            std::process::Command::new(t)
                .arg("--version")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        have("nbdkit") && have("nbdfuse") && std::path::Path::new("/dev/fuse").exists()
    }

    /// Serves `backing` (made sparse of `bytes` if missing) through the error filter (and the
    /// delay filter, if `params` has delays) with `params`, mounted under `dir/fuse`.
    pub fn start(
        dir: &std::path::Path,
        backing: &std::path::Path,
        bytes: u64,
        params: &[&str],
    ) -> io::Result<FaultyDevice> {
        use std::process::{Command, Stdio};
        if !backing.exists() {
            std::fs::File::create(backing)?.set_len(bytes)?;
        }
        let sock = dir.join("nbdkit.sock");
        let trigger = dir.join("eio-now");
        let delays = params.iter().any(|p| {
            p.starts_with("delay-") || p.starts_with("rdelay=") || p.starts_with("wdelay=")
        });
        let nbdkit = Command::new("nbdkit")
            .args(["-f", "--unix"])
            .arg(&sock)
            .args(delays.then_some("--filter=delay"))
            .args(["--filter=error", "file"])
            .arg(backing)
            .args(params)
            .arg(format!("error-file={}", trigger.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut nbdkit = nbdkit;
        let mnt = dir.join("fuse");
        let fuse = wait_for(&sock, "nbdkit's socket")
            .and_then(|()| std::fs::create_dir_all(&mnt))
            .and_then(|()| {
                Command::new("nbdfuse")
                    .arg(&mnt)
                    .arg("--unix")
                    .arg(&sock)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
            });
        let fuse = match fuse {
            Ok(f) => f,
            Err(e) => {
                let _ = nbdkit.kill();
                let _ = nbdkit.wait();
                return Err(e);
            }
        };
        let device = FaultyDevice {
            nbdkit,
            fuse,
            mnt,
            trigger,
        };
        // Dropped on failure: unmounted, both processes ended.
        wait_for(&device.path(), "the nbdfuse mount")?;
        Ok(device)
    }

    /// The device's file.
    pub fn path(&self) -> std::path::PathBuf {
        self.mnt.join("nbd")
    }

    /// Errors on (the trigger file exists) or off.
    pub fn errors(&self, on: bool) -> io::Result<()> {
        if on {
            std::fs::write(&self.trigger, b"")
        } else {
            std::fs::remove_file(&self.trigger)
        }
    }

    pub fn nbdkit_pid(&self) -> u32 {
        self.nbdkit.id()
    }

    /// Stops the device (nbdkit SIGSTOPped: every I/O waits) for `d`, from another thread,
    /// then continues it.
    pub fn stall_for(&self, d: Duration) -> thread::JoinHandle<io::Result<()>> {
        let pid = self.nbdkit.id().to_string();
        let signal = move |sig: &str| -> io::Result<()> {
            let status = std::process::Command::new("kill")
                .args([sig, &pid])
                .status()?;
            if status.success() {
                Ok(())
            } else {
                Err(io::Error::other(format!("kill {sig} {pid}: {status}")))
            }
        };
        let stopped = signal("-STOP");
        thread::spawn(move || {
            stopped?;
            thread::sleep(d);
            signal("-CONT")
        })
    }
}

/// Waits up to 10 s for `path` to exist.
fn wait_for(path: &std::path::Path, what: &str) -> io::Result<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        if std::time::Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "{what} did not appear: {}",
                path.display()
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

impl Drop for FaultyDevice {
    fn drop(&mut self) {
        // Bounded: the unmount and both processes end within a few seconds.
        let mut umount = std::process::Command::new("umount").arg(&self.mnt).spawn();
        if let Ok(u) = umount.as_mut() {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while matches!(u.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
                thread::sleep(Duration::from_millis(20));
            }
            let _ = u.kill();
        }
        for c in [&mut self.fuse, &mut self.nbdkit] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
