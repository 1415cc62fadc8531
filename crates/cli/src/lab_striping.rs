//! `cordillera lab striping`: narrow vs wide striping (Goyal, Radkov, Shenoy) on the simulator.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use cordillera_lab::spread;
use cordillera_lab::striping::{self, Fig, Options, Point};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FigArg {
    /// Figure 2(a): one store per array, large or small requests.
    #[value(name = "2a")]
    F2a,
    /// Figure 2(b): an anti-correlated large and small store per array.
    #[value(name = "2b")]
    F2b,
    /// Figure 3: the stripe unit (large 128 KB–1 MB, small 8–32 KB).
    #[value(name = "3")]
    F3,
    /// Figure 4: utilization, by inter-arrival times (large 30–100 ms, small 7–15 ms).
    #[value(name = "4")]
    F4,
    /// Figure 5: the large requests' size (64 KB–2 MB; stripe unit half the mean).
    #[value(name = "5")]
    F5,
    /// Figure 6: the fraction of writes (10–90 %).
    #[value(name = "6")]
    F6,
    /// Figure 7: the correlation of each array's pair (−1 … +1), arrays independent or
    /// synchronized.
    #[value(name = "7")]
    F7,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WideLayout {
    Units,
    Stripes,
}

#[derive(Args)]
pub struct StripingArgs {
    /// Array counts (RAID-5 4+p of Fujitsu MAJ3182MC disks; the paper: 1 to 25).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 4, 8, 16, 25])]
    arrays: Vec<usize>,
    /// Figures to run (each for every --arrays count).
    #[arg(long, value_delimiter = ',', value_enum, default_values_t = [
        FigArg::F2a, FigArg::F2b, FigArg::F3, FigArg::F4, FigArg::F5, FigArg::F6, FigArg::F7
    ])]
    figures: Vec<FigArg>,
    /// Simulated seconds of each run (one narrow and one wide per point).
    #[arg(long, default_value_t = 600.0)]
    duration_s: f64,
    /// How busy a store keeps its array's disks while ON (§3.2.1: 70–80 %).
    #[arg(long, default_value_t = 0.75)]
    utilization: f64,
    /// Mean ON period, seconds (OFF periods are as long).
    #[arg(long, default_value_t = 10.0)]
    mean_on_s: f64,
    /// How a wide store goes across arrays: `units` (the next array every stripe unit) or
    /// `stripes` (every whole RAID stripe of the store's unit, as a volume manager striping
    /// across arrays would).
    #[arg(long, value_enum, default_value_t = WideLayout::Units)]
    wide_layout: WideLayout,
    /// Seed of the streams (arrivals, sizes, offsets, ON periods).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run this many seeds (--seed, --seed + 1, …) and report each figure's spread.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write points.csv and spread.json here.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(a: StripingArgs) -> Result<()> {
    if a.arrays.is_empty() || a.arrays.iter().any(|&n| n == 0 || n > 64) {
        bail!("--arrays: 1 to 64 arrays each");
    }
    if !(a.duration_s >= 10.0 && a.duration_s <= 1e6) {
        bail!("--duration-s must be 10 to 10^6");
    }
    if !(a.utilization > 0.0 && a.utilization < 1.0) {
        bail!("--utilization must be between 0 and 1");
    }
    if !(a.mean_on_s > 0.0 && a.mean_on_s * 2.0 <= a.duration_s) {
        bail!("--mean-on-s must be positive and at most half of --duration-s");
    }
    if a.seeds == 0 || a.seeds > 1000 || a.seed.checked_add(a.seeds).is_none() {
        bail!("--seeds must be 1 to 1000 (and --seed + --seeds must not overflow)");
    }
    let options = Options {
        arrays: a.arrays.clone(),
        duration_s: a.duration_s,
        utilization: a.utilization,
        mean_on_s: a.mean_on_s,
        wide_whole_stripes: a.wide_layout == WideLayout::Stripes,
        figures: a
            .figures
            .iter()
            .map(|f| match f {
                FigArg::F2a => Fig::F2a,
                FigArg::F2b => Fig::F2b,
                FigArg::F3 => Fig::F3,
                FigArg::F4 => Fig::F4,
                FigArg::F5 => Fig::F5,
                FigArg::F6 => Fig::F6,
                FigArg::F7 => Fig::F7,
            })
            .collect(),
    };
    let started = Instant::now();
    let mut runs = Vec::new();
    let mut all: Vec<(u64, Vec<Point>)> = Vec::new();
    for seed in a.seed..a.seed + a.seeds {
        // Always said, even without a terminal: runs take minutes.
        let mut progress = |p: &Point| {
            eprintln!(
                "[{:>7.1} s] seed {seed}: Fig {} {}, {} arrays{}: narrow {:.1} ms, wide {:.1} ms, ratio {:.3}",
                started.elapsed().as_secs_f64(),
                p.figure,
                p.series,
                p.arrays,
                p.x.map_or(String::new(), |x| format!(", x = {x}")),
                p.narrow_ms,
                p.wide_ms,
                p.ratio
            );
        };
        let points = striping::run(&options, seed, &mut progress)
            .map_err(|e| anyhow::anyhow!("seed {seed}: {e}"))?;
        runs.push((seed, striping::figures(&points)));
        all.push((seed, points));
    }
    let rows = spread::spread(&runs);
    let seeds: Vec<u64> = runs.iter().map(|(s, _)| *s).collect();
    let doc = serde_json::json!({
        "seeds": seeds,
        "wide_layout": format!("{:?}", a.wide_layout).to_lowercase(),
        "duration_s": a.duration_s,
        "utilization": a.utilization,
        "spread": rows,
        "runs": all.iter().map(|(s, p)| serde_json::json!({"seed": s, "points": p})).collect::<Vec<_>>(),
    });
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        let mut csv = String::from(
            "seed,figure,series,arrays,x,x_label,narrow_utilization,narrow_ms,wide_ms,ratio,rate_on_per_s\n",
        );
        for (seed, points) in &all {
            for p in points {
                csv.push_str(&format!(
                    "{seed},{},\"{}\",{},{},\"{}\",{:.4},{:.4},{:.4},{:.5},{:.4}\n",
                    p.figure,
                    p.series,
                    p.arrays,
                    p.x.map_or(String::new(), |x| x.to_string()),
                    p.x_label,
                    p.narrow_utilization,
                    p.narrow_ms,
                    p.wide_ms,
                    p.ratio,
                    p.rate_on_per_s
                ));
            }
        }
        std::fs::write(dir.join("points.csv"), csv)?;
        std::fs::write(dir.join("spread.json"), serde_json::to_string_pretty(&doc)?)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!(
        "lab striping: wide over narrow mean response time, RAID-5 4+p arrays of fujitsu-maj3182mc, wide stores across arrays by {}, stores {:.0} % busy while ON, {} s per run, seeds {}–{}",
        match a.wide_layout {
            WideLayout::Units => "stripe unit",
            WideLayout::Stripes => "whole RAID stripe",
        },
        a.utilization * 100.0,
        a.duration_s,
        a.seed,
        a.seed + a.seeds - 1
    );
    print!("{}", spread::table(&rows, runs.len()));
    if let Some(dir) = &a.out {
        println!("\npoints.csv and spread.json in {}", dir.display());
    }
    Ok(())
}
