//! `cordillera bench lab-bonfire`: `lab bonfire` streaming a generated multi-day, multi-volume
//! trace, at sizes growing 4× at a time, each run a child process so its peak memory (maximum
//! resident set) is its own. Prints wall time, records per second and peak memory per size.
//!
//! The lab's memory is bounded by the working set and a day of requests per volume, not by the
//! trace's length: grown by days (`--grow days`, the default: the same rate over 4× the days),
//! memory stays flat; grown by rate, the day's requests grow with it.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

#[derive(Args)]
pub struct LabBenchArgs {
    /// Records of the first run over --days (k, m suffixes); each further size has 4× as many.
    #[arg(long, default_value = "25m")]
    records: String,
    /// Runs, each 4× the one before.
    #[arg(long, default_value_t = 2)]
    sizes: u32,
    /// Days of the first run.
    #[arg(long, default_value_t = 7)]
    days: u64,
    /// How the trace grows from one size to the next: over 4× the days at the same rate, or
    /// at 4× the rate over the same days.
    #[arg(long, value_enum, default_value_t = Grow::Days)]
    grow: Grow,
    #[arg(long, default_value_t = 8)]
    volumes: u32,
    /// Span of each volume's new data (the working set's bound).
    #[arg(long, default_value = "4g")]
    span: String,
    /// Threads of each run (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Grow {
    Days,
    Rate,
}

#[derive(Serialize)]
struct Run {
    spec: String,
    days: u64,
    records: u64,
    volumes: usize,
    working_set_blocks: u64,
    /// (volume, day) pairs warmed and compared at the middle setting.
    warmed_days: u64,
    wall_s: f64,
    records_per_s: f64,
    peak_rss_bytes: u64,
}

fn count(text: &str) -> Result<u64> {
    let t = text.trim().to_ascii_lowercase();
    let (digits, scale) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        _ => (&t[..], 1.0),
    };
    let v: f64 = digits
        .parse()
        .with_context(|| format!("--records {text:?}: not a count"))?;
    if !(v * scale >= 1e4 && v * scale <= 1e10) {
        bail!("--records {text}: must be 10k to 10g");
    }
    Ok((v * scale) as u64)
}

pub fn run(a: LabBenchArgs) -> Result<()> {
    let first = count(&a.records)?;
    if a.sizes == 0 || a.sizes > 4 || a.volumes < 2 || a.days < 2 || a.days > 90 {
        bail!("--sizes 1–4, --volumes ≥ 2 and --days 2–90");
    }
    let exe = std::env::current_exe().context("finding this program")?;
    let mut runs = Vec::new();
    // gen:reaccess: volume pairs of an hourly (rate r) and a daily (r/3) volume, plus the
    // daily volumes' nightly job (32,768 reads a night each).
    let pairs = a.volumes as f64 / 2.0;
    let nightly = (a.volumes / 2) as f64 * 32768.0 * a.days as f64;
    let base_rate = ((first as f64 - nightly).max(first as f64 * 0.1))
        / (a.days as f64 * 86400.0 * pairs * (4.0 / 3.0));
    for k in 0..a.sizes {
        let (days, rate) = match a.grow {
            Grow::Days => (a.days << (2 * k), base_rate),
            Grow::Rate => (a.days, base_rate * (1u64 << (2 * k)) as f64),
        };
        let target = first << (2 * k);
        let spec = format!(
            "gen:reaccess:days={days},volumes={},rate={rate:.3},span={}",
            a.volumes, a.span
        );
        eprintln!(
            "bench lab-bonfire: {spec} (about {} M records)",
            target / 1_000_000
        );
        let mut cmd = Command::new(&exe);
        cmd.args([
            "lab", "bonfire", "--parts", "days", "--json", "--quiet", "--trace",
        ])
        .arg(&spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        if let Some(t) = a.threads {
            cmd.args(["--threads", &t.to_string()]);
        }
        let (out, wall_s, rss) =
            run_measured(&mut cmd).with_context(|| format!("lab bonfire on {spec}"))?;
        let report: serde_json::Value =
            serde_json::from_str(&out).context("parsing lab bonfire's report")?;
        let volumes = report["days"]["volumes"]
            .as_array()
            .context("the report has no volumes")?;
        let records: u64 = volumes.iter().filter_map(|v| v["requests"].as_u64()).sum();
        let run = Run {
            spec,
            days,
            records,
            volumes: volumes.len(),
            working_set_blocks: volumes
                .iter()
                .filter_map(|v| v["working_set_blocks"].as_u64())
                .sum(),
            warmed_days: volumes
                .iter()
                .filter_map(|v| v["warmed_days"].as_u64())
                .sum(),
            wall_s,
            records_per_s: records as f64 / wall_s,
            peak_rss_bytes: rss,
        };
        eprintln!(
            "  {:.1} M records in {:.0} s ({:.0} k records/s), peak memory {:.2} GiB",
            run.records as f64 / 1e6,
            run.wall_s,
            run.records_per_s / 1e3,
            run.peak_rss_bytes as f64 / (1u64 << 30) as f64
        );
        runs.push(run);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
        return Ok(());
    }
    println!(
        "lab bonfire streaming gen:reaccess ({} volumes, new-data span {} each, growing by {}; the paper's grid: 4 cache sizes × 3 warm-ups × 2 regions × 4 algorithms per day, 9 threshold pairs)",
        a.volumes,
        a.span,
        if a.grow == Grow::Days { "days at one rate" } else { "rate over the same days" }
    );
    println!(
        "{:>6} {:>12} {:>14} {:>12} {:>10} {:>14} {:>12}",
        "days", "records", "working set", "warmed days", "wall s", "records/s", "peak memory"
    );
    for r in &runs {
        println!(
            "{:>6} {:>10.1} M {:>11.2} GB {:>12} {:>10.0} {:>12.0} k {:>8.2} GiB",
            r.days,
            r.records as f64 / 1e6,
            r.working_set_blocks as f64 * 4096.0 / 1e9,
            r.warmed_days,
            r.wall_s,
            r.records_per_s / 1e3,
            r.peak_rss_bytes as f64 / (1u64 << 30) as f64
        );
    }
    if let (Some(first), Some(last)) = (runs.first(), runs.last()) {
        if runs.len() > 1 {
            println!(
                "records ×{:.1} → peak memory ×{:.2} (the issue's targets for 100 M records over 7 days: under 30 minutes and 4 GiB)",
                last.records as f64 / first.records.max(1) as f64,
                last.peak_rss_bytes as f64 / first.peak_rss_bytes.max(1) as f64
            );
        }
    }
    Ok(())
}

/// Runs a child whose standard output is piped and returns that output, its wall time (s)
/// and its peak memory (maximum resident set, bytes); a failed child is an error.
pub fn run_measured(cmd: &mut Command) -> Result<(String, f64, u64)> {
    let started = Instant::now();
    let mut child = cmd.spawn().context("starting the child")?;
    let mut out = String::new();
    child
        .stdout
        .take()
        .context("the child's standard output is not piped")?
        .read_to_string(&mut out)
        .context("reading the child's report")?;
    let (status, rss) = wait_with_rusage(child.id() as libc::pid_t)?;
    let wall_s = started.elapsed().as_secs_f64();
    if status != 0 {
        bail!("failed (status {status})");
    }
    Ok((out, wall_s, rss))
}

/// Waits for the child and returns its exit status and maximum resident set, bytes.
fn wait_with_rusage(pid: libc::pid_t) -> Result<(i32, u64)> {
    let mut status: libc::c_int = 0;
    // SAFETY: wait4 fills the status and the struct it is given; the child is ours.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if r != pid {
        bail!("waiting for the child: {}", std::io::Error::last_os_error());
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    // Linux reports ru_maxrss in KiB.
    Ok((code, usage.ru_maxrss as u64 * 1024))
}
