//! `cordillera trace …`: read, convert and characterize block traces.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use cordillera_lab::input::TraceInput;
use cordillera_lab::tools::ConvertTo;
use cordillera_trace::peaks::{PeaksBuilder, PeaksOptions};
use cordillera_trace::profile::ProfileBuilder;
use cordillera_trace::reaccess::ReaccessBuilder;
use cordillera_trace::stats::StatsBuilder;
use cordillera_trace::write::IologOptions;
use cordillera_trace::{Format, Record, RecordReader, TimeUnit};
use cordillera_types::units::s_to_ns;

#[derive(Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Counts, bytes, rates, working set and reaccesses per volume and in total.
    Stats(StatsArgs),
    /// Convert a trace to the binary format, MSR CSV, a fio iolog or libCacheSim's oracleGeneral.
    Convert(ConvertArgs),
    /// The top peak episodes by request rate (Everest §2, Table 1, Figure 2).
    Peaks(PeaksArgs),
    /// Temporal reaccess classes, reuse distance and spatial clustering (Bonfire §3).
    Reaccess(ReaccessArgs),
    /// Load per hour of day and per day, and time at each fraction of peak (Sierra §2).
    Profile(ProfileArgs),
}

/// How to read the input trace; shared by every `trace` subcommand.
#[derive(Args, Clone)]
pub struct InputArgs {
    /// The trace file (`-` for standard input; .gz, .bz2 and .zst are decompressed), or a
    /// generated workload: gen:zipf, gen:diurnal, gen:bursty, gen:onoff, gen:exchange-like, gen:reaccess [:key=value,…].
    pub file: PathBuf,
    /// The trace format; detected from content when absent.
    #[arg(long, value_parser = clap::value_parser!(Format))]
    pub format: Option<Format>,
    /// Unit of ASCII5 timestamps (DiskSim uses ms, MQSim ns); ms when absent.
    #[arg(long, value_parser = clap::value_parser!(TimeUnit))]
    pub time_unit: Option<TimeUnit>,
    /// Block size of ARC `.lis` traces, in bytes.
    #[arg(long, default_value_t = 512)]
    pub arc_block_bytes: u64,
    /// Keep only these volumes (repeat, or separate with commas), e.g. `hm_0` for MSR.
    #[arg(long = "volume", value_delimiter = ',')]
    pub volumes: Vec<String>,
    /// Skip malformed lines (and report how many) instead of stopping at the first.
    #[arg(long)]
    pub skip_invalid: bool,
}

impl InputArgs {
    /// The trace these flags name, for the lab's reader.
    pub fn input(&self) -> TraceInput {
        TraceInput {
            file: self.file.clone(),
            format: self.format,
            time_unit: self.time_unit,
            arc_block_bytes: self.arc_block_bytes,
            volumes: self.volumes.clone(),
            skip_invalid: self.skip_invalid,
        }
    }
}

/// Opens the input and calls `each` on every record ([`TraceInput::for_each_record`]).
pub fn for_each_record(
    input: &InputArgs,
    each: impl FnMut(&dyn RecordReader, &Record),
) -> Result<Box<dyn RecordReader>> {
    input.input().for_each_record(each)
}

pub fn run(args: TraceArgs) -> Result<()> {
    match args.command {
        TraceCommand::Stats(args) => stats(args),
        TraceCommand::Convert(args) => convert(args),
        TraceCommand::Peaks(args) => peaks(args),
        TraceCommand::Reaccess(args) => reaccess(args),
        TraceCommand::Profile(args) => profile(args),
    }
}

fn positive_ns(seconds: f64, what: &str) -> Result<i64> {
    match s_to_ns(seconds) {
        Some(ns) if ns > 0 => Ok(ns),
        _ => bail!("{what} must be a positive number of seconds, not {seconds}"),
    }
}

fn print_json(value: &impl serde::Serialize) -> Result<()> {
    let stdout = io::stdout().lock();
    let mut out = BufWriter::new(stdout);
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// stats

#[derive(Args)]
struct StatsArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Window of the peak rate, in seconds.
    #[arg(long, default_value_t = 60.0)]
    window_s: f64,
}

fn stats(args: StatsArgs) -> Result<()> {
    let mut builder = StatsBuilder::new(positive_ns(args.window_s, "--window-s")?);
    let reader = for_each_record(&args.input, |_, record| builder.add(record))?;
    let stats = builder.finish(reader.volumes());
    if args.json {
        print_json(&stats)
    } else {
        print!("{}", cordillera_lab::render::trace::stats_text(&stats));
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// convert

#[derive(Clone, Copy, ValueEnum)]
enum OutputFormat {
    Binary,
    Msr,
    FioIolog,
    /// libCacheSim's oracleGeneral (24-byte requests with each object's next access): for
    /// `cachesim FILE oracleGeneral …`; a file, not standard output.
    #[value(name = "oraclegeneral")]
    OracleGeneral,
}

#[derive(Args)]
struct ConvertArgs {
    #[command(flatten)]
    input: InputArgs,
    /// The output file (`-` for standard output).
    output: PathBuf,
    /// The output format.
    #[arg(long)]
    to: OutputFormat,
    /// fio iolog: the file or device name the I/Os are addressed to.
    #[arg(long, default_value = "cordillera.img")]
    iolog_target: String,
    /// fio iolog: take offsets modulo this many bytes, to replay on a smaller target.
    #[arg(long)]
    iolog_wrap_bytes: Option<u64>,
    /// Binary: zstd compression level (1–19).
    #[arg(long, default_value_t = cordillera_trace::binary::DEFAULT_ZSTD_LEVEL)]
    zstd_level: i32,
}

fn convert(args: ConvertArgs) -> Result<()> {
    let to = match args.to {
        OutputFormat::Binary => ConvertTo::Binary {
            zstd_level: args.zstd_level,
        },
        OutputFormat::Msr => ConvertTo::Msr,
        OutputFormat::FioIolog => ConvertTo::FioIolog(IologOptions {
            target: args.iolog_target.clone(),
            wrap_bytes: args.iolog_wrap_bytes,
        }),
        OutputFormat::OracleGeneral => ConvertTo::OracleGeneral,
    };
    let written = cordillera_lab::tools::convert_to_file(&args.input.input(), &to, &args.output)?;
    let output = args.output.display();
    eprintln!("cordillera: wrote {written} records to {output}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// peaks

#[derive(Args)]
struct PeaksArgs {
    #[command(flatten)]
    input: InputArgs,
    #[arg(long)]
    json: bool,
    /// Episodes to report.
    #[arg(long, default_value_t = 3)]
    top: usize,
    /// Window over which request rates are measured, in seconds.
    #[arg(long, default_value_t = 60.0)]
    rate_window_s: f64,
    /// Segment length; an episode is the peak's segment plus the following ones.
    #[arg(long, default_value_t = 900.0)]
    segment_s: f64,
    /// Segments after the peak's segment included in its episode.
    #[arg(long, default_value_t = 1)]
    following_segments: u32,
    /// Interval over which mean response times are measured (Figure 2), in seconds.
    #[arg(long, default_value_t = 60.0)]
    rt_interval_s: f64,
    /// Mean response time above which an interval is slow, in seconds.
    #[arg(long, default_value_t = 1.0)]
    rt_threshold_s: f64,
    /// Where an episode lies: on the segment grid (Everest; a peak near a segment's end may be
    /// cut, and is marked) or centred on its peak.
    #[arg(long, value_enum, default_value_t = AlignArg::Grid)]
    align: AlignArg,
}

/// `--align`: where a peak episode lies around its peak.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AlignArg {
    /// The peak's segment and the following ones, on a grid from the trace start.
    Grid,
    /// As long as the segments (longer if the peak is), centred on the peak.
    Centred,
}

impl From<AlignArg> for cordillera_trace::peaks::EpisodeAlign {
    fn from(a: AlignArg) -> Self {
        match a {
            AlignArg::Grid => Self::Grid,
            AlignArg::Centred => Self::Centred,
        }
    }
}

fn peaks(args: PeaksArgs) -> Result<()> {
    let options = PeaksOptions {
        rate_window_ns: positive_ns(args.rate_window_s, "--rate-window-s")?,
        segment_ns: positive_ns(args.segment_s, "--segment-s")?,
        following_segments: args.following_segments,
        top: args.top,
        rt_interval_ns: positive_ns(args.rt_interval_s, "--rt-interval-s")?,
        rt_threshold_ns: positive_ns(args.rt_threshold_s, "--rt-threshold-s")?,
        align: args.align.into(),
    };
    let mut builder = PeaksBuilder::new(options).map_err(anyhow::Error::msg)?;
    let reader = for_each_record(&args.input, |_, record| builder.add(record))?;
    if !reader.info().has_time {
        bail!(
            "{} has no timestamps: peaks need them",
            args.input.file.display()
        );
    }
    let report = builder.finish(reader.volumes(), reader.info().origin_unix_ns);
    if args.json {
        return print_json(&report);
    }
    print!("{}", cordillera_lab::render::trace::peaks_text(&report));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// reaccess

#[derive(Args)]
struct ReaccessArgs {
    #[command(flatten)]
    input: InputArgs,
    #[arg(long)]
    json: bool,
    /// Hours added to UTC for the wall-clock hour of daily reaccesses.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    utc_offset_h: i64,
}

fn reaccess(args: ReaccessArgs) -> Result<()> {
    let mut builder = ReaccessBuilder::new(args.utc_offset_h);
    let reader = for_each_record(&args.input, |reader, record| {
        builder.add(record, reader.info())
    })?;
    let report = builder.finish(reader.volumes(), reader.info());
    if args.json {
        return print_json(&report);
    }
    print!("{}", cordillera_lab::render::trace::reaccess_text(&report));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// profile

#[derive(Args)]
struct ProfileArgs {
    #[command(flatten)]
    input: InputArgs,
    #[arg(long)]
    json: bool,
    /// Bucket length in seconds (must divide a day).
    #[arg(long, default_value_t = 3600.0)]
    bucket_s: f64,
    /// Hours added to UTC for hours of day and days.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    utc_offset_h: i64,
}

fn profile(args: ProfileArgs) -> Result<()> {
    let mut builder =
        ProfileBuilder::new(positive_ns(args.bucket_s, "--bucket-s")?, args.utc_offset_h)
            .map_err(anyhow::Error::msg)?;
    let reader = for_each_record(&args.input, |reader, record| {
        builder.add(record, reader.info())
    })?;
    if !reader.info().has_time {
        bail!(
            "{} has no timestamps: a profile needs them",
            args.input.file.display()
        );
    }
    let report = builder.finish(reader.info()).map_err(anyhow::Error::msg)?;
    if args.json {
        return print_json(&report);
    }
    print!("{}", cordillera_lab::render::trace::profile_text(&report));
    Ok(())
}
