//! An NBD export as a block device of this machine without a kernel NBD client: `nbdfuse`
//! makes the export a file, `losetup` a loop device over it; then `mkfs.ext4` and `mount` give
//! a real file system on it. Dropping it unmounts and detaches everything, even after a failed
//! assertion.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::{Bounded, COMMAND_LIMIT};

/// How long unmounting or detaching may take when the loop device is dropped.
const CLEANUP_LIMIT: Duration = Duration::from_secs(30);

pub struct NbdLoop {
    fuse_dir: PathBuf,
    mount_dir: PathBuf,
    fuse: Option<Child>,
    loop_device: Option<String>,
    mounted: bool,
}

fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output_within(COMMAND_LIMIT)
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl NbdLoop {
    /// Attaches the export at `uri` (e.g. `nbd://127.0.0.1:10809`) under `dir` (`dir/fuse`,
    /// `dir/mnt`); `direct_io` makes the loop device pass requests through without its own page
    /// cache. An error says why this machine cannot (no FUSE, no loop devices, not root).
    pub fn attach(uri: &str, dir: &Path, direct_io: bool) -> Result<NbdLoop, String> {
        let fuse_dir = dir.join("fuse");
        let mount_dir = dir.join("mnt");
        for d in [&fuse_dir, &mount_dir] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let fuse = Command::new("nbdfuse")
            .arg(&fuse_dir)
            .arg(uri)
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run nbdfuse (apt-get install libnbd-bin): {e}"))?;
        let mut n = NbdLoop {
            fuse_dir,
            mount_dir,
            fuse: Some(fuse),
            loop_device: None,
            mounted: false,
        };
        let file = n.fuse_dir.join("nbd");
        let started = Instant::now();
        while !file.exists() {
            if started.elapsed() > Duration::from_secs(10) {
                return Err("nbdfuse did not mount the export (is FUSE available?)".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let file = file.to_str().expect("UTF-8").to_string();
        let mut args = vec!["-f", "--show"];
        if direct_io {
            args.push("--direct-io=on");
        }
        args.push(&file);
        let device = run("losetup", &args)
            .map_err(|e| format!("losetup cannot attach a loop device here: {e}"))?;
        n.loop_device = Some(device.trim().to_string());
        Ok(n)
    }

    pub fn device(&self) -> &str {
        self.loop_device.as_deref().expect("attached")
    }

    pub fn mount_dir(&self) -> &Path {
        &self.mount_dir
    }

    pub fn mkfs_ext4(&self) -> Result<(), String> {
        run("mkfs.ext4", &["-q", self.device()]).map(|_| ())
    }

    pub fn mount(&mut self) -> Result<(), String> {
        run(
            "mount",
            &[self.device(), self.mount_dir.to_str().expect("UTF-8")],
        )?;
        self.mounted = true;
        Ok(())
    }

    /// Unmounts the file system. A process that has just exited (a database server stopped
    /// a moment ago) can keep the mount busy for a little while: "target is busy" is tried
    /// again for up to 10 s, and then names what holds the mount (`fuser -vm`).
    pub fn unmount(&mut self) -> Result<(), String> {
        if !self.mounted {
            return Ok(());
        }
        let dir = self.mount_dir.to_str().expect("UTF-8");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match run("umount", &[dir]) {
                Ok(_) => break,
                Err(e) if e.contains("busy") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) if e.contains("busy") => {
                    let holders = Command::new("fuser")
                        .args(["-vm", dir])
                        .output_within(Duration::from_secs(10))
                        .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_owned())
                        .unwrap_or_default();
                    return Err(format!("{e} (after 10 s; held by: {holders})"));
                }
                Err(e) => return Err(e),
            }
        }
        self.mounted = false;
        Ok(())
    }
}

impl Drop for NbdLoop {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount")
                .arg(&self.mount_dir)
                .status_within(CLEANUP_LIMIT);
        }
        if let Some(d) = &self.loop_device {
            let _ = Command::new("losetup")
                .args(["-d", d])
                .status_within(CLEANUP_LIMIT);
        }
        let _ = Command::new("umount")
            .arg(&self.fuse_dir)
            .status_within(CLEANUP_LIMIT);
        if let Some(mut f) = self.fuse.take() {
            let _ = f.kill();
            let _ = f.wait();
        }
    }
}
