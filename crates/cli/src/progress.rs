//! Progress of long lab runs on standard error: on a terminal one status line rewritten in
//! place (step k of n, elapsed, estimated time left); otherwise (a pipe, a log file, `nohup`)
//! one line per step, each stamped with the elapsed time. `--quiet` silences both.

use std::io::{self, IsTerminal, Write};
use std::sync::Mutex;
use std::time::Instant;

pub struct Progress {
    started: Instant,
    quiet: bool,
    terminal: bool,
    state: Mutex<State>,
}

struct State {
    done: usize,
    total: usize,
    /// The status line is on screen (a newline is due before anything else is printed).
    open: bool,
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        Progress {
            started: Instant::now(),
            quiet,
            terminal: io::stderr().is_terminal(),
            state: Mutex::new(State {
                done: 0,
                total: 0,
                open: false,
            }),
        }
    }

    /// The number of steps expected (an estimate is fine: the count is clamped).
    pub fn expect(&self, total: usize) {
        self.state.lock().expect("progress").total = total;
    }

    /// One step begins: `what` it is.
    pub fn step(&self, what: &str) {
        if self.quiet {
            return;
        }
        let elapsed = self.started.elapsed().as_secs_f64();
        let mut s = self.state.lock().expect("progress");
        s.done += 1;
        let count = if s.total > 0 {
            format!("{}/{} ", s.done.min(s.total), s.total)
        } else {
            String::new()
        };
        let mut err = io::stderr().lock();
        if self.terminal {
            let eta = if s.total > 0 && s.done > 1 {
                let per = elapsed / (s.done - 1) as f64;
                let left = per * (s.total.saturating_sub(s.done - 1)) as f64;
                format!(", about {} left", duration(left))
            } else {
                String::new()
            };
            let mut line = format!("[{} {count}{eta}] {what}", duration(elapsed));
            line.truncate(line.char_indices().nth(150).map_or(line.len(), |(i, _)| i));
            let _ = write!(err, "\r\x1b[2K{line}");
            s.open = true;
        } else {
            let _ = writeln!(err, "[{:>7.1} s] {count}{what}", elapsed);
        }
        let _ = err.flush();
    }

    /// A line that stays (a finding, a notice).
    pub fn say(&self, what: &str) {
        if self.quiet {
            return;
        }
        let mut s = self.state.lock().expect("progress");
        let mut err = io::stderr().lock();
        if s.open {
            let _ = writeln!(err);
            s.open = false;
        }
        let _ = writeln!(
            err,
            "[{:>7.1} s] {what}",
            self.started.elapsed().as_secs_f64()
        );
    }

    /// Ends the status line (before the report is printed).
    pub fn finish(&self) {
        let mut s = self.state.lock().expect("progress");
        if s.open {
            let _ = writeln!(io::stderr());
            s.open = false;
        }
    }
}

fn duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}
