//! `cordillera demo`: the main job on a built-in default — `advise` on the generated
//! multi-volume workload (peaks, a diurnal swing, hot data, a nightly job), the report written
//! to a folder, its path and the verdicts printed. No data or servers needed.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use cordillera_lab::advise::Outcome;

use crate::advise::{advise, AdviseArgs};

#[derive(Args)]
pub struct DemoArgs {
    /// Seed of the built-in workload and of the seeded runs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Days of the built-in workload.
    #[arg(long, default_value_t = 3)]
    days: u64,
    /// Seeds of the seeded runs.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// A faster, coarser answer (one seed, the busiest peak only).
    #[arg(long)]
    quick: bool,
    /// Where to write the report (default: a new folder under the system's temporary folder).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replace an earlier report's files in --out (see `advise --force`).
    #[arg(long)]
    force: bool,
    /// No progress on standard error.
    #[arg(long)]
    quiet: bool,
}

pub fn run(args: DemoArgs) -> Result<()> {
    let out = args.out.unwrap_or_else(|| {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        std::env::temp_dir().join(format!("cordillera-demo-{stamp}-{}", std::process::id()))
    });
    let a = AdviseArgs {
        traces: Vec::new(),
        format: None,
        time_unit: None,
        skip_invalid: false,
        device: None,
        array: None,
        seed: args.seed,
        seeds: args.seeds,
        quick: args.quick,
        days: args.days,
        peak_factor: crate::advise::BUILTIN_PEAK_FACTOR,
        peak_burst_ms: crate::advise::BUILTIN_PEAK_BURST_MS,
        threads: None,
        quiet: args.quiet,
        json: false,
        out: Some(out.clone()),
        force: args.force,
    };
    let reports = advise(&a)?;
    for (r, _) in &reports {
        println!(
            "Cordillera: what each mechanism would do for {}\n",
            r.source
        );
        for v in &r.verdicts {
            println!(
                "  {:<14} {:<16} {}",
                v.mechanism,
                match v.outcome {
                    Outcome::Applies => "applies",
                    Outcome::DoesNotApply => "does not apply",
                    Outcome::CannotJudge => "cannot judge",
                },
                v.summary
            );
        }
    }
    println!(
        "\nThe report (open it in a browser; it needs no network): {}",
        out.join("report.html").display()
    );
    println!(
        "Why each verdict, the figures with their spread and the commands behind them: in the report, or `cordillera advise --out DIR` for the full text."
    );
    println!("On your own trace: cordillera advise YOUR_TRACE --out DIR   (any format `cordillera trace stats` reads: MSR, SPC/UMass, CloudPhysics, Tencent, SYSTOR'17, ASCII5, ARC, .cdt; docs/USAGE.md)");
    Ok(())
}
