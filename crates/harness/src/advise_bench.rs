//! `cordillera bench advise`: how long `advise` takes on one day of one volume, the size of a
//! busy MSR Cambridge volume's day, and what each step costs. The trace is generated
//! (`gen:diurnal`, small random requests over a 50 GB volume, a 4:1 day-to-night swing),
//! written as MSR CSV so that parsing costs what it costs on a real MSR file, then judged by
//! `advise` in a child process (its peak memory its own), in full and with `--quick`.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

#[derive(Args)]
pub struct AdviseBenchArgs {
    /// Mean request rates of the generated day, requests/s, one run each (MSR Cambridge's
    /// volumes average 1–60: hm_0 about 7, prxy_0 about 21, src1_0 about 60).
    #[arg(long, value_delimiter = ',', default_values_t = [7.0, 60.0])]
    rates: Vec<f64>,
    /// Seeds advise runs (its default, 3).
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Threads of each run (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Run {
    rate_per_s: f64,
    quick: bool,
    records: u64,
    csv_bytes: u64,
    wall_s: f64,
    /// advise's own timing of each step, s.
    steps: Vec<(String, f64)>,
    peak_rss_bytes: u64,
    verdicts: Vec<String>,
}

pub fn run(a: AdviseBenchArgs) -> Result<()> {
    if a.rates.is_empty() || a.rates.iter().any(|r| !(*r > 0.0 && *r <= 2000.0)) {
        bail!("--rates: each 0 to 2000 requests/s");
    }
    if a.seeds == 0 || a.seeds > 100 {
        bail!("--seeds must be 1 to 100");
    }
    let exe = std::env::current_exe().context("finding this program")?;
    let dir = tempfile::tempdir().context("a temporary folder for the traces")?;
    let mut runs = Vec::new();
    for &rate in &a.rates {
        let csv = dir.path().join(format!("day-{rate}.csv"));
        let spec = format!(
            "gen:diurnal:days=1,rate={rate},bs=8k,read_fraction=0.6,span=50g,peak_to_trough=4"
        );
        eprintln!("bench advise: writing {spec} as MSR CSV");
        let status = Command::new(&exe)
            .args(["trace", "convert", "--to", "msr"])
            .arg(&spec)
            .arg(&csv)
            .stdout(Stdio::null())
            .status()
            .context("starting trace convert")?;
        if !status.success() {
            bail!("trace convert {spec} failed ({status})");
        }
        let csv_bytes = std::fs::metadata(&csv)?.len();
        for quick in [false, true] {
            eprintln!(
                "bench advise: advise{} on {:.0} MB of MSR CSV",
                if quick { " --quick" } else { "" },
                csv_bytes as f64 / 1e6
            );
            runs.push(advise_once(&exe, &csv, rate, quick, &a, csv_bytes)?);
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
        return Ok(());
    }
    println!(
        "advise on one generated day of one volume, written as MSR CSV (8 KiB random requests over 50 GB, 60 % reads, 4:1 day-to-night swing); {} seed(s) in full, 1 with --quick; {} thread(s)",
        a.seeds,
        a.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    );
    let steps: Vec<String> = runs
        .first()
        .map(|r| r.steps.iter().map(|(s, _)| s.clone()).collect())
        .unwrap_or_default();
    print!("{:>7} {:>7} {:>10}", "req/s", "mode", "records");
    for s in &steps {
        print!(" {:>14}", format!("{s} s"));
    }
    println!(" {:>9} {:>12}", "total s", "peak memory");
    for r in &runs {
        print!(
            "{:>7} {:>7} {:>8.2} M",
            r.rate_per_s,
            if r.quick { "quick" } else { "full" },
            r.records as f64 / 1e6
        );
        for s in &steps {
            let t = r
                .steps
                .iter()
                .find(|(n, _)| n == s)
                .map_or(f64::NAN, |x| x.1);
            print!(" {t:>14.1}");
        }
        println!(
            " {:>9.1} {:>8.2} GiB",
            r.wall_s,
            r.peak_rss_bytes as f64 / (1u64 << 30) as f64
        );
    }
    for r in &runs {
        println!(
            "{} req/s {}: {}",
            r.rate_per_s,
            if r.quick { "quick" } else { "full" },
            r.verdicts.join("; ")
        );
    }
    Ok(())
}

fn advise_once(
    exe: &Path,
    csv: &Path,
    rate: f64,
    quick: bool,
    a: &AdviseBenchArgs,
    csv_bytes: u64,
) -> Result<Run> {
    let mut cmd = Command::new(exe);
    cmd.arg("advise")
        .arg(csv)
        .args(["--json", "--quiet", "--seeds", &a.seeds.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if quick {
        cmd.arg("--quick");
    }
    if let Some(t) = a.threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    let (out, wall_s, rss) = crate::lab_bench::run_measured(&mut cmd)
        .with_context(|| format!("advise on {}", csv.display()))?;
    let json: serde_json::Value = serde_json::from_str(&out).context("parsing advise's report")?;
    let report = &json[0];
    let steps = report["timings"]
        .as_array()
        .context("the report has no timings")?
        .iter()
        .filter_map(|t| Some((t[0].as_str()?.to_owned(), t[1].as_f64()?)))
        .collect();
    let verdicts = report["verdicts"]
        .as_array()
        .context("the report has no verdicts")?
        .iter()
        .map(|v| {
            format!(
                "{} {}",
                v["mechanism"].as_str().unwrap_or("?"),
                v["outcome"].as_str().unwrap_or("?")
            )
        })
        .collect();
    Ok(Run {
        rate_per_s: rate,
        quick,
        records: report["characterization"]["records"].as_u64().unwrap_or(0),
        csv_bytes,
        wall_s,
        steps,
        peak_rss_bytes: rss,
        verdicts,
    })
}
