//! Real processes: started and waited for by the lines they print, their standard error kept
//! for failure messages, killed when dropped; commands run to their end within a time limit
//! ([`Bounded`]), so that no process a benchmark or a test starts can hang it.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a command a test runs to its end may take (a lab run, a tool on an export); the
/// nextest profile ends a whole test later than that (`.config/nextest.toml`).
pub const COMMAND_LIMIT: Duration = Duration::from_secs(240);

/// How long a daemon may take to print the lines [`Proc::spawn_until`] waits for.
pub const READY_LIMIT: Duration = Duration::from_secs(120);

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
    /// error, in order, for at most [`READY_LIMIT`]; returns the rest of each such line.
    pub fn spawn_until(
        program: &Path,
        args: &[String],
        wanted: &[&str],
    ) -> Result<(Proc, Vec<String>), String> {
        Proc::spawn_until_within(program, args, wanted, READY_LIMIT)
    }

    /// [`Proc::spawn_until`] with its own limit: past `limit` the process is killed and the
    /// error says which line it did not print.
    pub fn spawn_until_within(
        program: &Path,
        args: &[String],
        wanted: &[&str],
        limit: Duration,
    ) -> Result<(Proc, Vec<String>), String> {
        let mut child = Command::new(program)
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        let lines = BufReader::new(child.stderr.take().expect("piped")).lines();
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut proc = Proc {
            child,
            log: log.clone(),
        };
        // Every line goes to the log; until the caller has what it waits for, to it as well.
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                log.lock().expect("no panics").push(line.clone());
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + limit;
        let mut found = Vec::new();
        for prefix in wanted {
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(line) => {
                        if let Some(rest) = line.strip_prefix(prefix) {
                            found.push(rest.to_string());
                            break;
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        return Err(format!(
                            "{} {args:?} stopped before {prefix:?}:\n{}",
                            program.display(),
                            proc.log()
                        ));
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        proc.kill();
                        return Err(format!(
                            "{} {args:?} did not print {prefix:?} within {limit:?} (killed):\n{}",
                            program.display(),
                            proc.log()
                        ));
                    }
                }
            }
        }
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
        let pid = self.child.id();
        signal(pid, "TERM")?;
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

/// Sends `signal` (`TERM`, `KILL`, `STOP`, `CONT`…) to process `pid` with kill(1).
pub fn signal(pid: u32, signal: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status_within(Duration::from_secs(10))
        .map_err(|e| format!("kill -{signal} {pid}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{signal} {pid}: {status}"))
    }
}

/// A loopback address with a port free a moment ago.
pub fn free_addr() -> std::io::Result<SocketAddr> {
    std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()
}

/// Commands run to their end within a time limit. Past it the process is killed (SIGKILL) and
/// the error, of kind `TimedOut`, names the command and the limit, with what it had printed.
pub trait Bounded {
    /// `Command::output` within `limit`.
    fn output_within(&mut self, limit: Duration) -> std::io::Result<Output>;
    /// `Command::status` within `limit` (standard streams inherited).
    fn status_within(&mut self, limit: Duration) -> std::io::Result<ExitStatus>;
}

impl Bounded for Command {
    fn output_within(&mut self, limit: Duration) -> std::io::Result<Output> {
        let mut child = self
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let drain = |r: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut r) = r {
                    let _ = r.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let out = drain(
            child
                .stdout
                .take()
                .map(|r| Box::new(r) as Box<dyn Read + Send>),
        );
        let err = drain(
            child
                .stderr
                .take()
                .map(|r| Box::new(r) as Box<dyn Read + Send>),
        );
        let waited = wait_within(&mut child, limit);
        let stdout = out.join().expect("reader thread");
        let stderr = err.join().expect("reader thread");
        match waited {
            Ok(status) => Ok(Output {
                status,
                stdout,
                stderr,
            }),
            Err(()) => Err(timed_out(
                self,
                limit,
                &format!(
                    "{}{}",
                    String::from_utf8_lossy(&stdout),
                    String::from_utf8_lossy(&stderr)
                ),
            )),
        }
    }

    fn status_within(&mut self, limit: Duration) -> std::io::Result<ExitStatus> {
        let mut child = self.spawn()?;
        wait_within(&mut child, limit).map_err(|()| timed_out(self, limit, ""))
    }
}

/// Waits for `child` until `limit`; past it kills it (and waits for that) and says `Err`.
fn wait_within(child: &mut Child, limit: Duration) -> Result<ExitStatus, ()> {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) => {}
            // The child cannot be waited for: it is not ours to wait on any longer.
            Err(_) => return Err(()),
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(());
        }
        std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

fn timed_out(command: &Command, limit: Duration, printed: &str) -> std::io::Error {
    let args: Vec<_> = command.get_args().map(|a| a.to_string_lossy()).collect();
    let tail: String = {
        let lines: Vec<&str> = printed.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "{} {args:?} did not finish within {limit:?} and was killed; it had printed:\n{tail}",
            command.get_program().to_string_lossy()
        ),
    )
}
