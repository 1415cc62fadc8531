//! The command line's tools over a trace: convert it to another format, drive it through a
//! block cache that starts empty, replay it open-loop on a device model. Each streams the
//! trace (memory bounded by what the tool keeps, not the trace's length).

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Result};
use serde::Serialize;

use cordillera_models::device::Device;
use cordillera_sim::replay::{replay, ReplayReport};
use cordillera_trace::binary::BinaryWriter;
use cordillera_trace::write::{IologOptions, IologWriter, MsrWriter};
use cordillera_warmup::cache::{ArcCache, Cache, Clock, Fifo, Lru, Policy, S3Fifo, Sieve};
use cordillera_warmup::sim::{apply, Counts, BLOCK_BYTES};

use crate::input::TraceInput;

/// What a trace is converted to.
#[derive(Clone, Debug)]
pub enum ConvertTo {
    /// The binary format (zstd at this level).
    Binary {
        zstd_level: i32,
    },
    Msr,
    /// A fio iolog.
    FioIolog(IologOptions),
    /// libCacheSim's oracleGeneral (`cordillera_trace::oracle`): `path` must be a file, which
    /// the writer patches in place (`out` is not used).
    OracleGeneral,
}

/// Converts `input` into the file `output` (`-`: standard output); returns the records
/// written. The file is written under `output.partial` and renamed at the end, so a failed
/// conversion leaves no plausible-looking partial output (the partial file is removed).
pub fn convert_to_file(input: &TraceInput, to: &ConvertTo, output: &Path) -> Result<u64> {
    use anyhow::Context;
    use std::io::BufWriter;
    if output == Path::new("-") {
        let out = Box::new(BufWriter::new(std::io::stdout().lock()));
        return convert(input, to, out, output);
    }
    let mut name = output.to_owned().into_os_string();
    name.push(".partial");
    let partial = std::path::PathBuf::from(name);
    let file = std::fs::File::create(&partial)
        .with_context(|| format!("cannot create {}", partial.display()))?;
    let out = Box::new(BufWriter::with_capacity(1 << 20, file));
    let written = match convert(input, to, out, &partial) {
        Ok(written) => written,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    std::fs::rename(&partial, output).with_context(|| {
        format!(
            "cannot rename {} to {}",
            partial.display(),
            output.display()
        )
    })?;
    Ok(written)
}

/// Converts `input` into `out` (named `path` in errors); returns the records written. A fio
/// iolog leaves out zero-length records (fio rejects them), said on standard error.
pub fn convert(
    input: &TraceInput,
    to: &ConvertTo,
    out: Box<dyn std::io::Write>,
    path: &Path,
) -> Result<u64> {
    let written = match to {
        ConvertTo::Binary { zstd_level } => {
            let mut writer = BinaryWriter::with_level(out, path, *zstd_level)?;
            let reader = input.try_for_each_record(|reader, record| {
                writer.write(record, reader.volumes(), reader.info())
            })?;
            writer.finish(reader.info())?;
            reader.summary().records
        }
        ConvertTo::Msr => {
            let mut writer = MsrWriter::new(out, path);
            let reader = input.try_for_each_record(|reader, record| {
                writer.write(record, reader.volumes(), reader.info())
            })?;
            writer.finish(reader.info())?;
            reader.summary().records
        }
        ConvertTo::FioIolog(options) => {
            let mut writer = IologWriter::new(out, path, options.clone())?;
            let reader = input.try_for_each_record(|_, record| writer.write(record))?;
            let skipped = writer.skipped_empty;
            if skipped > 0 {
                eprintln!("cordillera: skipped {skipped} zero-length records (fio rejects them)");
            }
            writer.finish()?;
            reader.summary().records - skipped
        }
        ConvertTo::OracleGeneral => {
            drop(out);
            if path == Path::new("-") {
                bail!("oracleGeneral output patches each object's earlier request with the index of its next: name a file, not -");
            }
            let mut writer = cordillera_trace::oracle::OracleWriter::create(path)?;
            input.try_for_each_record(|_, record| writer.write(record))?;
            writer.finish()?
        }
    };
    Ok(written)
}

/// A trace through a cache that starts empty (`warmup simulate`).
#[derive(Serialize)]
pub struct Simulated {
    pub policy: Policy,
    pub cache_bytes: u64,
    pub cache_blocks: u64,
    #[serde(flatten)]
    pub counts: Counts,
    pub read_hit_rate: Option<f64>,
    pub seconds: f64,
    pub requests_per_s: f64,
}

/// Drives `input` through a `policy` cache of `cache_bytes` (whole 4 KiB blocks).
pub fn simulate_cache(input: &TraceInput, policy: Policy, cache_bytes: u64) -> Result<Simulated> {
    let blocks = cache_bytes / BLOCK_BYTES;
    if blocks >= u64::from(u32::MAX) {
        bail!(
            "--cache-size {cache_bytes} is over the simulator's limit of 2^32 - 1 blocks (16 TiB)"
        );
    }
    fn drive<C: Cache>(mut cache: C, input: &TraceInput) -> Result<Counts> {
        let mut counts = Counts::default();
        input.for_each_record(|_, record| apply(&mut cache, record, &mut counts))?;
        Ok(counts)
    }
    let capacity = blocks as usize;
    let started = Instant::now();
    let counts = match policy {
        Policy::Lru => drive(Lru::new(capacity), input)?,
        Policy::Fifo => drive(Fifo::new(capacity), input)?,
        Policy::Clock => drive(Clock::new(capacity), input)?,
        Policy::Sieve => drive(Sieve::new(capacity), input)?,
        Policy::S3Fifo => drive(S3Fifo::new(capacity), input)?,
        Policy::Arc => drive(ArcCache::new(capacity), input)?,
    };
    let seconds = started.elapsed().as_secs_f64();
    Ok(Simulated {
        policy,
        cache_bytes,
        cache_blocks: blocks,
        read_hit_rate: counts.read_hit_rate(),
        requests_per_s: counts.requests as f64 / seconds.max(1e-9),
        counts,
        seconds,
    })
}

/// [`Simulated`] as text.
pub fn simulated_text(out: &Simulated) -> String {
    let c = &out.counts;
    format!(
        "{} cache of {} blocks ({} bytes), starting empty
  requests            {:>14} ({} reads, {} writes)
  read block accesses {:>14}
  read block hits     {:>14}   hit rate {}
  write block accesses{:>14}
  {:.2} s, {:.1} M requests/s (reading the trace included)
",
        out.policy,
        out.cache_blocks,
        out.cache_bytes,
        c.requests,
        c.read_requests,
        c.write_requests,
        c.read_block_accesses,
        c.read_block_hits,
        out.read_hit_rate
            .map_or("-".to_owned(), |r| format!("{:.2} %", r * 100.0)),
        c.write_block_accesses,
        out.seconds,
        out.requests_per_s / 1e6
    )
}

/// Replays `input` open-loop on `device`, its timestamps divided by `speed`, counted per
/// `interval_ns` (`sim replay`). A trace without timestamps is refused.
pub fn replay_trace(
    input: &TraceInput,
    device: &mut dyn Device,
    interval_ns: u64,
    speed: f64,
) -> Result<ReplayReport> {
    let mut reader = input.open()?;
    if !reader.info().has_time {
        bail!(
            "{} has no timestamps: an open-loop replay needs them",
            input.file.display()
        );
    }
    if !(speed > 0.0 && speed.is_finite()) {
        bail!("--speed must be positive");
    }
    let mut error = None;
    let records =
        crate::input::records_until_error(reader.as_mut(), &mut error).map(|mut record| {
            if speed != 1.0 {
                record.time_ns = (record.time_ns as f64 / speed) as i64;
            }
            record
        });
    let report = replay(records, device, interval_ns);
    if let Some(e) = error {
        return Err(e.into());
    }
    Ok(report)
}
