//! Real processes for the tests and the benchmarks that drive them: started and waited for by
//! the lines they print, their standard error kept for failure messages, killed when dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A child process killed when dropped; its standard error, line by line, is kept.
pub struct Proc {
    pub child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    /// A child started elsewhere, killed when dropped (its standard error is not kept).
    pub fn adopt(child: Child) -> Proc {
        Proc {
            child,
            log: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Runs `program args…` and waits for a line starting with each of `wanted` on its standard
    /// error, in order; returns the rest of each such line.
    pub fn spawn_until(
        program: &Path,
        args: &[String],
        wanted: &[&str],
    ) -> Result<(Proc, Vec<String>), String> {
        let mut child = Command::new(program)
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
        let log = Arc::new(Mutex::new(Vec::new()));
        let proc = Proc {
            child,
            log: log.clone(),
        };
        let mut found = Vec::new();
        for prefix in wanted {
            loop {
                let Some(Ok(line)) = lines.next() else {
                    return Err(format!(
                        "{} {args:?} stopped before {prefix:?}:\n{}",
                        program.display(),
                        proc.log()
                    ));
                };
                log.lock().expect("no panics").push(line.clone());
                if let Some(rest) = line.strip_prefix(prefix) {
                    found.push(rest.to_string());
                    break;
                }
            }
        }
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                log.lock().expect("no panics").push(line);
            }
        });
        Ok((proc, found))
    }

    /// What it printed on standard error so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("no panics").join("\n")
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits up to `limit` for the exit; whether it exited successfully.
    pub fn terminate(&mut self, limit: Duration) -> Result<bool, String> {
        let pid = self.child.id().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .map_err(|e| format!("kill: {e}"))?;
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Ok(status.success());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "process {pid} did not exit within {limit:?} of SIGTERM"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback address with a port free a moment ago.
pub fn free_addr() -> std::io::Result<SocketAddr> {
    std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()
}

/// Whether `program` is installed; says SKIPPED when it is not.
pub fn have(program: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("SKIPPED: {program} is not installed (scripts/test.sh installs it)");
    }
    found
}

/// Writes 24 patterns of 4 to 64 KiB at scattered offsets of an NBD export with `qemu-io`,
/// flushes, and reads back every one that no later pattern overlaps; `Err` with qemu-io's
/// output if it fails or reads back anything else.
pub fn qemu_io_patterns(url: &str, export_bytes: u64) -> Result<(), String> {
    let mut args: Vec<String> = vec!["-f".into(), "raw".into(), url.into()];
    let places: Vec<(u64, u64, u8)> = (0..24)
        .map(|i| {
            (
                (i * 2_654_435_761u64) % (export_bytes / 4096 - 16) * 4096,
                4096 * (1 + i % 16),
                0x10 + i as u8,
            )
        })
        .collect();
    for &(at, len, p) in &places {
        args.extend(["-c".into(), format!("write -P {p} {at} {len}")]);
    }
    args.extend(["-c".into(), "flush".into()]);
    // Later writes win where places overlap: read back only what nothing later overwrote.
    for (k, &(at, len, p)) in places.iter().enumerate() {
        let later = places[k + 1..]
            .iter()
            .any(|&(a, l, _)| a < at + len && at < a + l);
        if !later {
            args.extend(["-c".into(), format!("read -P {p} {at} {len}")]);
        }
    }
    let out = Command::new("qemu-io")
        .args(&args)
        .output()
        .map_err(|e| format!("cannot run qemu-io: {e}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || text.contains("fail") || text.matches("read ").count() < 10 {
        return Err(text);
    }
    Ok(())
}

/// fio's NBD engine on `url` with crc32c verification (iodepth 8, the first bad block fatal)
/// and `extra` arguments; its output. Panics, with the output, on any error or bad block.
pub fn fio_verify(url: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "--name=verify".to_string(),
        "--ioengine=nbd".into(),
        format!("--uri={url}"),
        "--iodepth=8".into(),
        "--verify=crc32c".into(),
        "--verify_fatal=1".into(),
        "--verify_state_save=0".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = Command::new("fio").args(&args).output().expect("fio runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "fio {args:?} failed:\n{text}");
    assert!(!text.contains("verify: bad"), "{text}");
    text
}
