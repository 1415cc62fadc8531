//! `cordillera demo`: the main job on a built-in default. Generates a synthetic bursty,
//! diurnal, multi-volume trace in memory and characterizes it with every `trace` analysis, so
//! a fresh clone shows what Cordillera measures without any data.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use cordillera_trace::binary::BinaryWriter;
use cordillera_trace::peaks::{PeaksBuilder, PeaksOptions};
use cordillera_trace::profile::ProfileBuilder;
use cordillera_trace::reaccess::ReaccessBuilder;
use cordillera_trace::stats::StatsBuilder;
use cordillera_trace::synth::{generate, SynthOptions};
use cordillera_types::units::{format_unix_ns, NS_PER_HOUR};

#[derive(Args)]
pub struct DemoArgs {
    /// Seed of the synthetic trace.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Days of trace to generate.
    #[arg(long, default_value_t = 2)]
    days: u64,
    /// Volumes.
    #[arg(long, default_value_t = 4)]
    volumes: u32,
    /// Also save the generated trace in the binary format, for the `trace` commands.
    #[arg(long)]
    save: Option<PathBuf>,
}

pub fn run(args: DemoArgs) -> Result<()> {
    let options = SynthOptions {
        volumes: args.volumes.max(1),
        duration_s: args.days.max(1) * 24 * 3600,
        seed: args.seed,
        ..SynthOptions::default()
    };
    let (info, volumes, records) = generate(&options);
    println!(
        "Synthetic trace (seed {}): {} volumes, {} days from {} UTC, {} records, {} peaks of {}× for {} s",
        options.seed,
        options.volumes,
        args.days.max(1),
        format_unix_ns(info.origin_unix_ns.unwrap_or(0)),
        records.len(),
        options.peaks,
        options.peak_factor,
        options.peak_duration_s
    );
    let mut stats = StatsBuilder::new(60_000_000_000);
    let mut peaks = PeaksBuilder::new(PeaksOptions::default()).map_err(anyhow::Error::msg)?;
    let mut reaccess = ReaccessBuilder::new(0);
    let mut profile = ProfileBuilder::new(NS_PER_HOUR, 0).map_err(anyhow::Error::msg)?;
    for record in &records {
        stats.add(record);
        peaks.add(record);
        reaccess.add(record, &info);
        profile.add(record, &info);
    }
    println!("\n== trace stats ==");
    crate::trace_cmd::print_stats_table(&stats.finish(&volumes));
    println!("\n== trace peaks ==");
    crate::trace_cmd::print_peaks(&peaks.finish(&volumes, info.origin_unix_ns));
    println!("\n== trace reaccess ==");
    crate::trace_cmd::print_reaccess(&reaccess.finish(&volumes, &info));
    println!("\n== trace profile ==");
    crate::trace_cmd::print_profile(&profile.finish(&info).map_err(anyhow::Error::msg)?);
    if let Some(path) = args.save {
        let file = std::fs::File::create(&path)?;
        let mut writer = BinaryWriter::new(std::io::BufWriter::new(file), &path)?;
        for record in &records {
            writer.write(record, &volumes, &info)?;
        }
        writer.finish(&info)?;
        println!(
            "\nSaved the trace to {} (try: cordillera trace stats {})",
            path.display(),
            path.display()
        );
    }
    Ok(())
}
