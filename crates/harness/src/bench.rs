//! `cordillera bench trace`: throughput of trace parsing, binary reading and `stats`, measured
//! in memory on one core, with a baseline (scanning the same bytes for newlines) measured in
//! the same run, so the figures can be compared across noisy machines.

use std::io::Cursor;
use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use clap::{Args, Subcommand};
use cordillera_trace::binary::BinaryWriter;
use cordillera_trace::read::from_read;
use cordillera_trace::stats::StatsBuilder;
use cordillera_trace::write::MsrWriter;
use cordillera_trace::{
    Format, ReadOptions, Record, RecordReader, TraceInfo, VolumeId, VolumeTable,
};
use cordillera_types::Op;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Records per second of MSR CSV parsing, binary reading and `trace stats`.
    Trace(TraceBenchArgs),
    /// Simulated I/O completions per second of a trace replay on one disk and on a RAID-5.
    Sim(SimBenchArgs),
    /// Cost of an off-loaded write's range-map lookup + update at 10^6 ranges.
    Rangemap(RangemapBenchArgs),
    /// Requests per second of the cache simulator (LRU, FIFO, CLOCK, SIEVE, S3-FIFO, ARC) on a
    /// trace held in memory, against a straightforward std-collections LRU and libCacheSim's
    /// same policies (equal hit counts required); bytes per cached block.
    Cache(CacheBenchArgs),
    /// `lab bonfire` streaming a generated 7-day, 8-volume trace at growing sizes (default up
    /// to 100 M records): wall time, records per second and peak memory of each run.
    LabBonfire(crate::lab_bench::LabBenchArgs),
    /// `advise` on one generated day of one volume (a busy MSR volume's day, written as MSR
    /// CSV), in full and with --quick: wall time of each step and peak memory.
    Advise(crate::advise_bench::AdviseBenchArgs),
    /// The NBD port with TLS (a pre-shared key) and without: `volume serve` against `nbdkit
    /// file` with the same key, nbdcopy as the client; 1 MiB writes and reads, 4 KiB reads.
    Tls(crate::tls_bench::TlsBenchArgs),
}

#[derive(Args)]
struct CacheBenchArgs {
    /// The trace (any format `trace stats` reads) or a generated workload; default Bonfire's
    /// §6.1 Zipf workload (5 M 4 KiB reads, alpha 0.4 over 50 GB).
    #[arg(long, default_value = "gen:zipf")]
    trace: std::path::PathBuf,
    /// Cache size in bytes (k, m, g suffixes).
    #[arg(long, default_value = "1g")]
    cache_size: String,
    /// Rounds (each policy, the baseline, then libCacheSim, in turn); the fastest of each is
    /// reported.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Do not run libCacheSim beside ours (by default it runs when a Python here imports
    /// `libcachesim`: `CORDILLERA_LIBCACHESIM_PYTHON`, `target/peers/venv`, or `python3`).
    #[arg(long)]
    no_peer: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct RangemapBenchArgs {
    /// Ranges in the map before the measurement.
    #[arg(long, default_value_t = 1_000_000)]
    ranges: u64,
    /// Lookup + update operations measured.
    #[arg(long, default_value_t = 1_000_000)]
    ops: u64,
    /// Repetitions of each measurement; the fastest is reported.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct SimBenchArgs {
    /// Requests replayed on each configuration.
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Repetitions of each measurement; the fastest is reported.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct TraceBenchArgs {
    /// Records in the generated trace.
    #[arg(long, default_value_t = 2_000_000)]
    records: u64,
    /// Repetitions of each measurement; the fastest is reported.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: BenchArgs) -> Result<()> {
    match args.command {
        BenchCommand::Trace(args) => trace(args),
        BenchCommand::Sim(args) => sim(args),
        BenchCommand::Rangemap(args) => rangemap(args),
        BenchCommand::Cache(args) => cache(args),
        BenchCommand::LabBonfire(args) => crate::lab_bench::run(args),
        BenchCommand::Advise(args) => crate::advise_bench::run(args),
        BenchCommand::Tls(args) => crate::tls_bench::run(args),
    }
}

/// The baseline LRU: what one writes first with std collections, a map from block to its
/// last-use stamp and an ordered map from stamp to block.
struct StdLru {
    capacity: usize,
    stamps: std::collections::HashMap<u64, u64>,
    order: std::collections::BTreeMap<u64, u64>,
    clock: u64,
}

impl cordillera_warmup::cache::Cache for StdLru {
    fn access(&mut self, block: u64) -> bool {
        self.clock += 1;
        if let Some(stamp) = self.stamps.get_mut(&block) {
            self.order.remove(stamp);
            *stamp = self.clock;
            self.order.insert(self.clock, block);
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        if self.stamps.len() == self.capacity {
            let (_, victim) = self.order.pop_first().expect("full");
            self.stamps.remove(&victim);
        }
        self.stamps.insert(block, self.clock);
        self.order.insert(self.clock, block);
        false
    }
    fn contains(&self, block: u64) -> bool {
        self.stamps.contains_key(&block)
    }
    fn len(&self) -> usize {
        self.stamps.len()
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
}

/// One policy's simulation over the records, from a fresh cache.
type CacheRun = Box<dyn FnMut(&[Record]) -> cordillera_warmup::sim::Counts>;

/// Our policies' counts and best times, the baseline's, and libCacheSim's side when it runs:
/// rounds of each in turn (see `cache`).
#[allow(clippy::type_complexity)]
fn cache_rounds(
    records: &[Record],
    blocks: usize,
    args: &CacheBenchArgs,
) -> Result<(
    Vec<(
        cordillera_warmup::cache::Policy,
        f64,
        cordillera_warmup::sim::Counts,
    )>,
    (f64, cordillera_warmup::sim::Counts),
    Option<crate::cache_peer::Rounds>,
)> {
    use cordillera_warmup::cache::{ArcCache, Clock, Fifo, Lru, Policy, S3Fifo, Sieve};
    use cordillera_warmup::sim::{simulate, Counts};
    // Each policy through its own type (no dynamic dispatch per access).
    fn run_of<C: cordillera_warmup::cache::Cache + 'static>(mut c: C) -> CacheRun {
        Box::new(move |r: &[Record]| simulate(&mut c, r.iter().copied()))
    }
    let make = |policy: Option<Policy>| match policy {
        Some(Policy::Lru) => run_of(Lru::new(blocks)),
        Some(Policy::Fifo) => run_of(Fifo::new(blocks)),
        Some(Policy::Clock) => run_of(Clock::new(blocks)),
        Some(Policy::Sieve) => run_of(Sieve::new(blocks)),
        Some(Policy::S3Fifo) => run_of(S3Fifo::new(blocks)),
        Some(Policy::Arc) => run_of(ArcCache::new(blocks)),
        None => run_of(StdLru {
            capacity: blocks,
            stamps: Default::default(),
            order: Default::default(),
            clock: 0,
        }),
    };
    // Rounds of every policy, the baseline, then libCacheSim, each from an empty cache: a slow
    // phase of a shared machine falls on both sides. Best of `repeat` rounds; the counts of
    // every run of a policy must agree.
    let runs: Vec<Option<Policy>> = Policy::ALL
        .iter()
        .copied()
        .map(Some)
        .chain([None])
        .collect();
    let mut best: Vec<(f64, Option<Counts>)> = vec![(f64::INFINITY, None); runs.len()];
    let mut peer = if args.no_peer {
        None
    } else {
        crate::cache_peer::Rounds::start(records, blocks as u64)?
    };
    for _ in 0..args.repeat.max(1) {
        for (policy, (seconds, counts)) in runs.iter().zip(&mut best) {
            let mut run = make(*policy);
            let started = Instant::now();
            let c = run(records);
            *seconds = seconds.min(started.elapsed().as_secs_f64());
            if let Some(previous) = counts {
                anyhow::ensure!(*previous == c, "two runs disagree");
            }
            *counts = Some(c);
        }
        if let Some(p) = &mut peer {
            p.round()?;
        }
    }
    let mut best: Vec<(f64, Counts)> = best
        .into_iter()
        .map(|(s, c)| (s, c.expect("at least one run")))
        .collect();
    let (base_s, base) = best.pop().expect("the baseline's run");
    let ours: Vec<(Policy, f64, Counts)> = Policy::ALL
        .iter()
        .zip(best)
        .map(|(p, (s, c))| (*p, s, c))
        .collect();
    Ok((ours, (base_s, base), peer))
}

fn cache(args: CacheBenchArgs) -> Result<()> {
    use cordillera_warmup::cache::{Lru, Policy};
    use cordillera_warmup::sim::{Counts, BLOCK_BYTES};
    let mut records = Vec::new();
    cordillera_lab::input::TraceInput::file(&args.trace)
        .for_each_record(|_, r| records.push(*r))?;
    anyhow::ensure!(!records.is_empty(), "the trace has no records");
    let bytes =
        cordillera_models::presets::parse_size(&args.cache_size).map_err(anyhow::Error::msg)?;
    let blocks = (bytes / BLOCK_BYTES) as usize;
    anyhow::ensure!(blocks < u32::MAX as usize, "--cache-size is too large");
    let n = records.len() as u64;
    let (ours, (base_s, base), peer) = cache_rounds(&records, blocks, &args)?;
    let (lru_s, lru) = (ours[0].1, ours[0].2.clone());
    debug_assert_eq!(ours[0].0, Policy::Lru);
    anyhow::ensure!(
        base.read_block_hits == lru.read_block_hits,
        "the baseline LRU and ours disagree: {} against {} hits",
        base.read_block_hits,
        lru.read_block_hits
    );
    let peer = match peer {
        Some(p) => Some(p.finish(&ours)?),
        None => None,
    };
    // Memory per cached block, of a full cache.
    let mut full = Lru::new(blocks);
    for b in 0..blocks as u64 {
        cordillera_warmup::cache::Cache::access(&mut full, b * 7919);
    }
    let per_block = full.memory_bytes() as f64 / blocks.max(1) as f64;
    let accesses = lru.read_block_accesses + lru.write_block_accesses;
    let names: Vec<String> = ours.iter().map(|(p, _, _)| p.to_string()).collect();
    let mut rows: Vec<(&str, f64, &Counts)> = ours
        .iter()
        .zip(&names)
        .map(|((_, s, c), name)| (name.as_str(), *s, c))
        .collect();
    rows.push(("baseline: std HashMap + BTreeMap LRU", base_s, &base));
    let seconds: Vec<f64> = ours.iter().map(|(_, s, _)| *s).collect();
    if args.json {
        let policies: Vec<serde_json::Value> = rows
            .iter()
            .map(|(name, s, c)| {
                serde_json::json!({
                    "policy": name,
                    "seconds": s,
                    "requests_per_s": n as f64 / s,
                    "block_accesses_per_s": accesses as f64 / s,
                    "read_block_hits": c.read_block_hits,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "trace": args.trace,
                "requests": n,
                "block_accesses": accesses,
                "read_block_accesses": lru.read_block_accesses,
                "cache_blocks": blocks,
                "policies": policies,
                "lru_ratio_to_baseline": base_s / lru_s,
                "lru_bytes_per_cached_block": per_block,
                "libcachesim": peer_json(&peer, n, &seconds),
            }))?
        );
        return Ok(());
    }
    println!(
        "cache simulator on {} ({n} requests, {accesses} block accesses, in memory), {blocks} blocks; best of {}",
        args.trace.display(),
        args.repeat
    );
    println!(
        "{:<40} {:>14} {:>16} {:>12}",
        "policy", "M requests/s", "M block acc./s", "read hits"
    );
    for (name, s, c) in rows {
        println!(
            "{:<40} {:>14.1} {:>16.1} {:>12}",
            name,
            n as f64 / s / 1e6,
            accesses as f64 / s / 1e6,
            c.read_block_hits
        );
    }
    print_peer(&peer, n, &seconds, args.no_peer, args.repeat);
    println!(
        "LRU {:.2}x the baseline (target: at least 20 M requests/s on one core, libCacheSim's published speed); {:.1} bytes per cached block",
        base_s / lru_s,
        per_block
    );
    Ok(())
}

/// libCacheSim's runs and the Python that ran them, when it did.
type Peer = Option<(
    std::path::PathBuf,
    Vec<(String, crate::cache_peer::PeerRun)>,
)>;

/// libCacheSim's rows for `--json`: each policy's rate and hits, and ours over its time
/// (`ours`: our seconds for each policy, in [`Policy::ALL`]'s order, as libCacheSim ran them).
fn peer_json(peer: &Peer, n: u64, ours: &[f64]) -> Option<serde_json::Value> {
    peer.as_ref().map(|(python, runs)| {
        serde_json::json!({
            "python": python,
            "policies": runs.iter().zip(ours).map(|((name, r), ours)| serde_json::json!({
                "policy": name,
                "seconds": r.seconds,
                "requests_per_s": n as f64 / r.seconds,
                "block_accesses_per_s": r.requests as f64 / r.seconds,
                "hits": r.hits,
                "ours_over_libcachesim": r.seconds / ours,
            })).collect::<Vec<_>>(),
        })
    })
}

/// libCacheSim's rows beside ours, with each ratio and the hits both counted.
fn print_peer(peer: &Peer, n: u64, ours: &[f64], no_peer: bool, repeat: u32) {
    match peer {
        Some((python, runs)) => {
            for ((name, r), ours) in runs.iter().zip(ours) {
                println!(
                    "{:<40} {:>14.1} {:>16.1} {:>12}",
                    format!("libCacheSim {name}"),
                    n as f64 / r.seconds / 1e6,
                    r.requests as f64 / r.seconds / 1e6,
                    r.hits
                );
                println!(
                    "  {name}: ours {:.2}x libCacheSim (target: at least 3x), the same {} hits",
                    r.seconds / ours,
                    r.hits
                );
            }
            println!("  (libCacheSim through {}, best of {} rounds interleaved with ours, timed around process_trace; hits are reads and writes, every block access being a get there)", python.display(), repeat);
        }
        None if no_peer => {}
        None => println!(
            "libCacheSim: no Python here imports libcachesim (pip install libcachesim; scripts/test.sh installs it into target/peers/venv): not compared"
        ),
    }
}

/// A client's range map with `ranges` off-loaded 8 KiB ranges, 16 KiB apart; each operation is
/// what an off-loaded write costs the map: a lookup of a random 4–64 KiB range (which pieces
/// are off-loaded, where) and then an update of it to a newer version on some store. The
/// baseline, measured in the same run, is a point lookup + insert in a `BTreeMap` of as many
/// keys.
fn rangemap(args: RangemapBenchArgs) -> Result<()> {
    use cordillera_sim::rng::SimRng;
    use cordillera_types::rangemap::RangeMap;
    use std::collections::BTreeMap;
    const SPACING: u64 = 16 << 10;
    let (n, ops) = (args.ranges.max(1), args.ops.max(1));
    let span = n * SPACING;
    let build = || {
        let mut map: RangeMap<(u64, u32)> = RangeMap::new();
        for i in 0..n {
            map.insert(i * SPACING, i * SPACING + (8 << 10), (i, (i % 4) as u32));
        }
        map
    };
    let (mut size_after, mut pieces) = (0, 0u64);
    let (mut map_s, mut base_s) = (f64::INFINITY, f64::INFINITY);
    // Alternately, so that slow phases of a shared machine fall on both; only the loops are
    // timed, not building the maps.
    for _ in 0..args.repeat.max(1) {
        let mut map = build();
        let mut rng = SimRng::new(7, 1);
        pieces = 0;
        let started = Instant::now();
        for op in 0..ops {
            let start = rng.below(span / 4096) * 4096;
            let end = start + (1 + rng.below(16)) * 4096;
            pieces += map.lookup(start, end).len() as u64;
            let (version, store) = (n + op, (op % 4) as u32);
            map.update(start, end, |_, _, _| Some((version, store)));
        }
        map_s = map_s.min(started.elapsed().as_secs_f64());
        size_after = map.len();

        let mut map: BTreeMap<u64, u64> = (0..n).map(|i| (i * SPACING, i)).collect();
        let mut rng = SimRng::new(7, 1);
        let mut found = 0u64;
        let started = Instant::now();
        for op in 0..ops {
            let key = rng.below(n) * SPACING;
            found += map.get(&key).copied().unwrap_or(0) & 1;
            map.insert(key, op);
        }
        base_s = base_s.min(started.elapsed().as_secs_f64());
        std::hint::black_box(found);
    }
    let per_op_ns = map_s / ops as f64 * 1e9;
    let base_ns = base_s / ops as f64 * 1e9;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "ranges": n,
                "ops": ops,
                "ranges_after": size_after,
                "range_map_lookup_update_ns": per_op_ns,
                "btreemap_get_insert_ns": base_ns,
                "ratio_to_baseline": per_op_ns / base_ns,
                "pieces_per_lookup": pieces as f64 / ops as f64,
            }))?
        );
        return Ok(());
    }
    println!(
        "range map of {n} ranges, {ops} off-loaded writes (lookup of 4–64 KiB + update); best of {}",
        args.repeat
    );
    println!("{:<52} {:>10}", "measurement", "ns/op");
    println!("{:<52} {:>10.1}", "range map lookup + update", per_op_ns);
    println!(
        "{:<52} {:>10.1}",
        "baseline: BTreeMap get + insert, same key count", base_ns
    );
    println!(
        "ratio {:.2} to the baseline; {} ranges after; {:.2} pieces per lookup",
        per_op_ns / base_ns,
        size_after,
        pieces as f64 / ops as f64
    );
    Ok(())
}

/// An MSR-like trace: 8 volumes, 4 KiB–64 KiB requests, 60 % reads, one request every 50 µs.
fn generate(count: u64) -> (TraceInfo, VolumeTable, Vec<Record>) {
    let mut volumes = VolumeTable::new();
    for v in 0..8 {
        volumes
            .intern(format!("host{}_{v}", v / 2).as_bytes())
            .unwrap();
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let records = (0..count)
        .map(|i| {
            let r = next();
            Record {
                time_ns: i as i64 * 50_000 + (r % 1000) as i64 * 100,
                volume: VolumeId((r >> 10) as u32 % 8),
                op: if (r >> 20) % 10 < 6 {
                    Op::Read
                } else {
                    Op::Write
                },
                offset_bytes: ((r >> 24) % (64 << 20)) * 4096,
                length_bytes: 4096 * (1 + (r >> 50) % 16),
                response_ns: Some(((r >> 40) % 200_000) * 100),
            }
        })
        .collect();
    let info = TraceInfo {
        format: Format::Msr,
        origin_unix_ns: Some(1_172_163_600_000_000_000),
        has_time: true,
        last_line_unterminated: false,
    };
    (info, volumes, records)
}

/// The fastest of `repeat` runs of `f`, in seconds.
fn best_of(repeat: u32, mut f: impl FnMut() -> Result<u64>, expected: u64) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let started = Instant::now();
        let n = f()?;
        best = best.min(started.elapsed().as_secs_f64());
        anyhow::ensure!(n == expected, "measured {n} items, expected {expected}");
    }
    Ok(best)
}

/// A reader over a copy of `bytes` (the copy is part of every measurement, baseline included).
fn reader_of(bytes: &[u8], format: Format) -> Result<Box<dyn RecordReader>> {
    let options = ReadOptions {
        format: Some(format),
        ..ReadOptions::default()
    };
    let input = Box::new(Cursor::new(bytes.to_vec()));
    Ok(from_read(Path::new("bench"), input, &options)?)
}

fn count_records(bytes: &[u8], format: Format) -> Result<u64> {
    let mut reader = reader_of(bytes, format)?;
    let mut n = 0;
    while reader.next_record()?.is_some() {
        n += 1;
    }
    Ok(n)
}

fn stats_of(bytes: &[u8], format: Format) -> Result<u64> {
    let mut reader = reader_of(bytes, format)?;
    let mut builder = StatsBuilder::new(60_000_000_000);
    while let Some(record) = reader.next_record()? {
        builder.add(&record);
    }
    Ok(builder.finish(reader.volumes()).total.records)
}

fn trace(args: TraceBenchArgs) -> Result<()> {
    let n = args.records;
    let (info, volumes, records) = generate(n);
    let mut msr = MsrWriter::new(Vec::new(), Path::new("bench.csv"));
    for r in &records {
        msr.write(r, &volumes, &info)?;
    }
    let csv = msr.finish(&info)?;
    let mut binary = BinaryWriter::new(Vec::new(), Path::new("bench.cdt"))?;
    let started = Instant::now();
    for r in &records {
        binary.write(r, &volumes, &info)?;
    }
    let binary = binary.finish(&info)?;
    let binary_write_s = started.elapsed().as_secs_f64();
    drop(records);

    // The copy into the reader's buffer is part of every measurement, baseline included.
    let baseline_s = best_of(
        args.repeat,
        || Ok(memchr::memchr_iter(b'\n', &csv.to_vec()).count() as u64),
        n,
    )?;
    let csv_s = best_of(args.repeat, || count_records(&csv, Format::Msr), n)?;
    let binary_s = best_of(args.repeat, || count_records(&binary, Format::Binary), n)?;
    let stats_csv_s = best_of(args.repeat, || stats_of(&csv, Format::Msr), n)?;
    let stats_binary_s = best_of(args.repeat, || stats_of(&binary, Format::Binary), n)?;

    let rate = |s: f64| n as f64 / s;
    let rows = [
        ("baseline: newline scan of the MSR CSV", baseline_s),
        ("MSR CSV parse", csv_s),
        ("binary read", binary_s),
        ("binary write", binary_write_s),
        ("stats end to end, MSR CSV", stats_csv_s),
        ("stats end to end, binary", stats_binary_s),
    ];
    if args.json {
        let json: Vec<_> = rows
            .iter()
            .map(|(name, s)| serde_json::json!({"measurement": name, "seconds": s, "records_per_s": rate(*s), "vs_baseline": baseline_s / s}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "records": n, "csv_bytes": csv.len(), "binary_bytes": binary.len(), "results": json
            }))?
        );
        return Ok(());
    }
    println!(
        "{n} records: MSR CSV {:.1} MB, binary {:.1} MB ({:.2} bytes/record); one thread, best of {}",
        csv.len() as f64 / 1e6,
        binary.len() as f64 / 1e6,
        binary.len() as f64 / n as f64,
        args.repeat
    );
    println!(
        "{:<40} {:>14} {:>14}",
        "measurement", "records/s", "× baseline"
    );
    for (name, s) in rows {
        println!("{name:<40} {:>14.0} {:>14.3}", rate(s), baseline_s / s);
    }
    println!("targets: MSR CSV parse ≥ 2,000,000 records/s; binary read ≥ 20,000,000 records/s");
    Ok(())
}

/// Replays a Poisson stream (64 % reads, 4–64 KiB, uniform offsets) open-loop on `cheetah-15k`
/// (at 120 requests/s, about 80 % utilization) and on a 5-disk RAID-5 of them (at 300/s), and
/// reports simulated completions per second of wall-clock time. The baseline is the same number
/// of events pushed through and popped from the kernel's event queue alone.
fn sim(args: SimBenchArgs) -> Result<()> {
    use cordillera_models::presets::{build, ArraySpec};
    use cordillera_sim::kernel::EventQueue;
    use cordillera_sim::replay::replay;
    let n = args.records;
    let configurations: [(&str, Option<ArraySpec>, f64); 2] = [
        ("cheetah-15k", None, 120.0),
        (
            "raid5:5 of cheetah-15k",
            Some("raid5:5".parse().map_err(anyhow::Error::msg)?),
            300.0,
        ),
    ];
    let baseline_s = best_of(
        args.repeat,
        || {
            let mut queue = EventQueue::new();
            let mut popped = 0;
            for i in 0..n {
                queue.push(i * 7 % 1000 + i, i);
                if queue.len() > 64 {
                    queue.pop();
                    popped += 1;
                }
            }
            while queue.pop().is_some() {
                popped += 1;
            }
            Ok(popped)
        },
        n,
    )?;
    let mut rows = vec![(
        "baseline: event queue push + pop".to_owned(),
        baseline_s,
        0.0,
    )];
    for (name, array, rate) in configurations {
        let capacity = build("cheetah-15k", array)
            .map_err(anyhow::Error::msg)?
            .capacity_bytes();
        let records = bench_records(n, rate, capacity, 1);
        let mut utilization = 0.0;
        let seconds = best_of(
            args.repeat,
            || {
                let mut device = build("cheetah-15k", array).map_err(anyhow::Error::msg)?;
                let report = replay(records.iter().copied(), device.as_mut(), 1_000_000_000);
                utilization = report.utilization;
                Ok(report.reads.count + report.writes.count)
            },
            n,
        )?;
        rows.push((
            format!("replay on {name} at {rate} requests/s"),
            seconds,
            utilization,
        ));
    }
    if args.json {
        let results: Vec<_> = rows
            .iter()
            .map(|(name, s, u)| serde_json::json!({"measurement": name, "seconds": s, "completions_per_s": n as f64 / s, "vs_baseline": baseline_s / s, "utilization": u}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"records": n, "results": results}))?
        );
        return Ok(());
    }
    println!(
        "{n} requests per configuration; one thread, best of {}",
        args.repeat
    );
    println!(
        "{:<48} {:>16} {:>12} {:>8}",
        "measurement", "completions/s", "× baseline", "util%"
    );
    for (name, s, u) in rows {
        println!(
            "{name:<48} {:>16.0} {:>12.3} {:>8.1}",
            n as f64 / s,
            baseline_s / s,
            100.0 * u
        );
    }
    println!("target: at least 2,000,000 simulated completions/s on one core");
    Ok(())
}

/// Records of a replay benchmark: `count` MSR-like requests at `rate_per_s`, 64 % reads.
pub fn bench_records(count: u64, rate_per_s: f64, capacity_bytes: u64, seed: u64) -> Vec<Record> {
    let mut rng = cordillera_sim::rng::SimRng::new(seed, 0);
    let mut time_ns = 0f64;
    (0..count)
        .map(|_| {
            time_ns += rng.exponential(1e9 / rate_per_s);
            let length_bytes = 4096 * (1 + rng.below(16));
            Record {
                time_ns: time_ns as i64,
                volume: cordillera_trace::VolumeId(0),
                op: if rng.chance(0.64) {
                    Op::Read
                } else {
                    Op::Write
                },
                offset_bytes: rng.below((capacity_bytes - length_bytes) / 4096) * 4096,
                length_bytes,
                response_ns: None,
            }
        })
        .collect()
}
