//! `cordillera volume serve|status`: a base volume exported over NBD, off-loading writes to
//! stores in a peak (Everest), and a look at a running one.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{anyhow, bail, ensure, Context, Result};
use clap::{Args, Subcommand};
use cordillera_offload::Policy;
use cordillera_runtime::disk::IoMode;
use cordillera_runtime::emulate::EmulateSpec;
use cordillera_runtime::volume_server::{serve, VolumeOptions};
use cordillera_runtime::warm_cache::CacheOptions;
use serde::Deserialize;

use cordillera_runtime::http::{http_get, http_request};

#[derive(Args)]
pub struct VolumeArgs {
    #[command(subcommand)]
    command: VolumeCommand,
}

#[derive(Subcommand)]
enum VolumeCommand {
    /// Export a base volume over NBD, off-loading writes to stores while it is loaded.
    Serve(Box<ServeArgs>),
    /// Show a running volume server's off-loaded data and how long reclaiming it will take.
    Status(StatusArgs),
    /// Replace a running server's cache with a new, empty one and warm it up from the warm-up
    /// log and staging buffer (Bonfire §5.2); prints the cache's status.
    CacheReset(CacheResetArgs),
    /// Measure the volume server against `nbdkit file` and against itself without off-load.
    Bench(cordillera_harness::volume_bench::VolumeBenchArgs),
    /// Everest's worst case (Figure 10) on two emulated servers, without and with a bound.
    WorstCase(cordillera_harness::volume_worst_case::WorstCaseArgs),
    /// Bonfire's overheads on real I/O (Table 4): log space, logging bandwidth and pre-warm
    /// time for metadata-only and metadata+data, on a replayed trace.
    WarmupBench(cordillera_harness::volume_warmup_bench::WarmupBenchArgs),
    /// PostgreSQL pgbench on ext4 on the volume (emulated base and store): TPS with off-load
    /// against without. Needs root, FUSE and PostgreSQL.
    Pgbench(cordillera_harness::volume_pgbench::PgbenchArgs),
}

/// Every flag of `volume serve` can also be given in a TOML file (`--config`), under the same
/// names with `-` written `_`: `base = "/dev/sdb"`, `store = ["10.0.0.2:7300"]`, `n_way = 2`.
/// Flags given on the command line win.
#[derive(Args, Default)]
struct ServeArgs {
    /// A TOML file with any of the flags below.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The base volume: a file or block device.
    #[arg(long)]
    base: Option<PathBuf>,
    /// Export an object of a Sierra cluster instead of a base volume: the MDS's address
    /// (`cluster mds`). Takes --object, --size, --nbd and --export-name; the other flags are
    /// for a base volume.
    #[arg(long, conflicts_with = "base")]
    cluster: Option<String>,
    /// With --cluster: the object's name.
    #[arg(long, requires = "cluster")]
    object: Option<String>,
    /// With --cluster: create the object with this size if it does not exist (k, m, g).
    #[arg(long, requires = "cluster")]
    size: Option<String>,
    /// Where to listen for NBD clients [default: 127.0.0.1:10809].
    #[arg(long)]
    nbd: Option<SocketAddr>,
    /// A store (`cordillera store serve`) to off-load to, HOST:PORT; repeat for several.
    /// Without any, `--format` makes a plain volume (no off-loading); stores given later to a
    /// plain volume are added to it. On a restart of a volume with stores, the volume's own
    /// list is used (and must match if given).
    #[arg(long = "store")]
    store: Vec<String>,
    /// Make a base volume without a volume label a volume (its last 8 KiB are reserved for
    /// the label and the store set). Never needed again for that volume.
    #[arg(long)]
    format: bool,
    /// Copies of each off-loaded write, on different stores [default: 1]. Fixed at format.
    #[arg(long)]
    n_way: Option<usize>,
    /// Off-load only while the base volume has more than this many requests in flight
    /// [default: 32].
    #[arg(long)]
    t_base: Option<u64>,
    /// Off-load only to stores with fewer than this many requests in flight [default: 32].
    #[arg(long)]
    t_store: Option<u64>,
    /// Reclaim operations in flight at most [default: 256].
    #[arg(long)]
    n_reclaim: Option<usize>,
    /// When to off-load: `peak` (Everest), `always` (every write, never reclaimed) or
    /// `baseline` (never) [default: peak].
    #[arg(long)]
    policy: Option<String>,
    /// Give the base volume, in real time, the timing of this modeled device
    /// (`cheetah-15k`, any `sim` preset, or an array: `cheetah-15k@raid0:4`).
    #[arg(long)]
    emulate: Option<String>,
    /// I/O to the base volume: `buffered` (page cache; FLUSH and FUA call fdatasync),
    /// `direct` (O_DIRECT) or `auto` [default: buffered].
    #[arg(long)]
    io: Option<String>,
    /// Serve Prometheus metrics (`/metrics`) and a status document (`/status`) here.
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// The export's name (clients asking for another name are refused) [default: ""].
    #[arg(long)]
    export_name: Option<String>,
    #[command(flatten)]
    limits: crate::limit_args::LimitArgs,
    #[command(flatten)]
    tls: crate::tls_args::TlsArgs,
    #[command(flatten)]
    cluster_key: crate::tls_args::ClusterKeyArgs,
    /// A file holding the control token for `--metrics` (as `pool serve --control-token`).
    #[arg(long, value_name = "FILE")]
    control_token: Option<PathBuf>,
    /// A write that every store refuses as full (and that must stay off-loaded) is answered
    /// ENOSPC after this many milliseconds; reclaim runs meanwhile [default: 5000].
    #[arg(long)]
    full_timeout_ms: Option<u64>,
    /// With `--n-way` N above 1, an off-loaded write is acknowledged only once N stores hold
    /// it: missing copies are sent to stores as they become available for this many
    /// milliseconds, then the write fails with EIO (a write that need not stay off-loaded goes
    /// to the base when fewer than N stores are up) [default: 10000: past the 3 s after which
    /// a store that does not answer counts as failed, so that a copy it held goes to another
    /// store first].
    #[arg(long)]
    copies_timeout_ms: Option<u64>,
    /// A store silent this many milliseconds counts as failed and what it holds is reclaimed at
    /// any load: set it above the worst wait at its disk [default: 3000; docs/USAGE.md].
    #[arg(long)]
    store_timeout_ms: Option<u64>,
    /// At a restart, how long to wait for every store before serving without those that
    /// failed to answer, if they are at most N-1 [default: 1000].
    #[arg(long)]
    recovery_grace_ms: Option<u64>,
    /// At most this much data off-loaded and not yet reclaimed, writes in flight included
    /// (e.g. 1g): past it, new data goes to the base volume, overwrites of off-loaded data
    /// wait for reclaim (ENOSPC after --full-timeout-ms), and from 90 % of it reclaim runs
    /// whatever the load [default: no bound]. docs/USAGE.md says when to set it.
    #[arg(long, value_name = "SIZE")]
    offload_bytes_max: Option<String>,
    /// The same bound per store: at most this much whose latest version one store holds
    /// for this volume [default: no bound].
    #[arg(long, value_name = "SIZE")]
    offload_bytes_max_per_store: Option<String>,
    /// Record the volume's reads and writes, with their response times, as a binary trace to
    /// this file, for `cordillera advise FILE` (docs/USAGE.md). Finished on a clean stop.
    #[arg(long)]
    record_trace: Option<PathBuf>,
    /// The recorded trace's size at most, over FILE and FILE.1 (the older half, rotated)
    /// [default: 256m].
    #[arg(long)]
    record_trace_size: Option<String>,
    #[command(flatten)]
    store_here: cordillera_harness::volume_worst_case::StoreHereArgs,
    /// A DRAM block cache of this size above the volume (k, m, g suffixes) [default: none].
    #[arg(long)]
    cache_size: Option<String>,
    /// Bonfire's warm-up log (a file or device, created at --warmup-log-size if absent): every
    /// I/O below the cache is logged, and a new cache is pre-loaded from it at start.
    #[arg(long)]
    warmup_log: Option<PathBuf>,
    /// Size of a new warm-up log [default: 64m].
    #[arg(long)]
    warmup_log_size: Option<String>,
    /// Log the data too (the performance snapshot: metadata+data), so that a pre-load after a
    /// clean stop reads the log sequentially instead of the volume.
    #[arg(long)]
    warmup_data: bool,
    /// How much to pre-load: bytes, or a percentage of the cache [default: 25%].
    #[arg(long)]
    warmup_size: Option<String>,
    /// Which logged blocks the pre-load chooses (Bonfire §4.2): last-k (the most recently
    /// accessed), first-k (the first accessed in the log), top-k (the most often accessed),
    /// random-k [default: last-k].
    #[arg(long)]
    warmup_algorithm: Option<String>,
    /// The metadata staging buffer [default: 256k].
    #[arg(long)]
    staging_metadata: Option<String>,
    /// The data staging buffer (with --warmup-data) [default: 128m].
    #[arg(long)]
    staging_data: Option<String>,
}

/// The TOML file: the same fields, all optional.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ServeFile {
    base: Option<PathBuf>,
    nbd: Option<SocketAddr>,
    #[serde(default)]
    store: Vec<String>,
    #[serde(default)]
    format: bool,
    n_way: Option<usize>,
    t_base: Option<u64>,
    t_store: Option<u64>,
    n_reclaim: Option<usize>,
    policy: Option<String>,
    emulate: Option<String>,
    io: Option<String>,
    metrics: Option<SocketAddr>,
    export_name: Option<String>,
    full_timeout_ms: Option<u64>,
    copies_timeout_ms: Option<u64>,
    store_timeout_ms: Option<u64>,
    recovery_grace_ms: Option<u64>,
    offload_bytes_max: Option<String>,
    offload_bytes_max_per_store: Option<String>,
    record_trace: Option<PathBuf>,
    record_trace_size: Option<String>,
    cache_size: Option<String>,
    warmup_log: Option<PathBuf>,
    warmup_log_size: Option<String>,
    #[serde(default)]
    warmup_data: bool,
    warmup_size: Option<String>,
    warmup_algorithm: Option<String>,
    staging_metadata: Option<String>,
    staging_data: Option<String>,
}

#[derive(Args)]
struct CacheResetArgs {
    /// The server's `--metrics` address.
    #[arg(long)]
    metrics: SocketAddr,
}

#[derive(Args)]
struct StatusArgs {
    /// The server's `--metrics` address.
    #[arg(long)]
    metrics: SocketAddr,
    /// Print the status document as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: VolumeArgs) -> Result<()> {
    match args.command {
        VolumeCommand::Serve(a) if a.cluster.is_some() => serve_cluster(*a),
        VolumeCommand::Serve(a) => {
            let options = options(*a)?;
            // Two event threads: an NBD connection reads its requests on one while the core
            // hands writes to the base volume on the other (one thread halves 1 MiB
            // sequential write bandwidth, as every copy then happens in turn).
            crate::block_on(
                2,
                serve(options, |l| {
                    eprintln!("cordillera volume: NBD export at nbd://{}", l.nbd);
                    if let Some(m) = l.metrics {
                        eprintln!("cordillera volume: metrics at http://{m}/metrics");
                    }
                }),
            )
        }
        VolumeCommand::Status(a) => status(a),
        VolumeCommand::CacheReset(a) => {
            println!("{}", http_request(a.metrics, "POST", "/cache/reset")?);
            Ok(())
        }
        VolumeCommand::Bench(a) => cordillera_harness::volume_bench::run(a),
        VolumeCommand::WorstCase(a) => cordillera_harness::volume_worst_case::run(a),
        VolumeCommand::WarmupBench(a) => cordillera_harness::volume_warmup_bench::run(a),
        VolumeCommand::Pgbench(a) => cordillera_harness::volume_pgbench::run_pgbench(a),
    }
}

/// `volume serve --cluster MDS --object NAME`: an object of a Sierra cluster over NBD.
fn serve_cluster(a: ServeArgs) -> Result<()> {
    use cordillera_runtime::sierra::volume::{serve, ClusterVolumeOptions};
    let mds = a.cluster.expect("--cluster");
    let object = a
        .object
        .ok_or_else(|| anyhow!("--cluster needs --object NAME"))?;
    let size = match &a.size {
        Some(s) => Some(cordillera_models::presets::parse_size(s).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let mut export = cordillera_runtime::nbd_server::ExportConfig::default();
    if let Some(name) = a.export_name {
        export.name = name;
    }
    export.limits = a.limits.limits()?;
    export.tls = a.tls.nbd()?;
    let options = ClusterVolumeOptions {
        mds,
        object,
        size,
        nbd: a
            .nbd
            .unwrap_or_else(|| "127.0.0.1:10809".parse().expect("an address")),
        export,
        http: a.metrics.map(|m| m.to_string()),
        insecure: a.tls.insecure,
        tls: a.cluster_key.sierra()?,
    };
    crate::serve_until_interrupted(
        2,
        serve(options, |l| {
            eprintln!(
                "cordillera volume: NBD export at nbd://{} ({} bytes, cluster object)",
                l.nbd, l.size_bytes
            );
        }),
    )
}

fn parse_policy(text: &str) -> Result<Policy> {
    Ok(match text {
        "peak" => Policy::Peak,
        "always" => Policy::Always,
        "baseline" => Policy::Baseline,
        other => bail!("unknown policy {other:?} (peak, always or baseline)"),
    })
}

fn options(a: ServeArgs) -> Result<VolumeOptions> {
    let file = match &a.config {
        None => ServeFile::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            toml::from_str(&text).with_context(|| format!("{}", path.display()))?
        }
    };
    let base = a
        .base
        .or(file.base)
        .ok_or_else(|| anyhow!("--base is required (or `base` in the config file)"))?;
    let nbd = a
        .nbd
        .or(file.nbd)
        .unwrap_or_else(|| "127.0.0.1:10809".parse().expect("address"));
    let mut o = VolumeOptions::new(base, nbd);
    o.stores = if a.store.is_empty() {
        file.store
    } else {
        a.store
    };
    o.format = a.format || file.format;
    o.n_way = a.n_way.or(file.n_way).unwrap_or(1);
    o.t_base = a.t_base.or(file.t_base).unwrap_or(o.t_base);
    o.t_store = a.t_store.or(file.t_store).unwrap_or(o.t_store);
    o.n_reclaim = a.n_reclaim.or(file.n_reclaim).unwrap_or(o.n_reclaim).max(1);
    if let Some(p) = a.policy.or(file.policy) {
        o.policy = parse_policy(&p)?;
    }
    if let Some(e) = a.emulate.or(file.emulate) {
        o.emulate = Some(e.parse::<EmulateSpec>().map_err(|e| anyhow!(e))?);
    }
    if let Some(io) = a.io.or(file.io) {
        o.io = io.parse::<IoMode>().map_err(|e| anyhow!(e))?;
    }
    o.metrics = a.metrics.or(file.metrics);
    o.export_name = a.export_name.or(file.export_name).unwrap_or_default();
    o.limits = a.limits.limits()?;
    o.tls = a.tls.nbd()?;
    o.insecure = a.tls.insecure;
    o.store_tls = a.cluster_key.client()?;
    let token = a.control_token.as_deref();
    o.control_token = token
        .map(cordillera_runtime::http::ControlToken::read)
        .transpose()?;
    if let Some(ms) = a.full_timeout_ms.or(file.full_timeout_ms) {
        o.full_timeout = std::time::Duration::from_millis(ms);
    }
    if let Some(ms) = a.copies_timeout_ms.or(file.copies_timeout_ms) {
        o.copies_timeout = std::time::Duration::from_millis(ms);
    }
    if let Some(ms) = a.store_timeout_ms.or(file.store_timeout_ms) {
        ensure!(ms > 0, "--store-timeout-ms must be 1 or more");
        o.store_timeout = std::time::Duration::from_millis(ms);
    }
    if let Some(ms) = a.recovery_grace_ms.or(file.recovery_grace_ms) {
        o.recovery_grace = std::time::Duration::from_millis(ms);
    }
    let size = |flag: &str, v: Option<String>| -> Result<Option<u64>> {
        v.map(|t| cordillera_models::presets::parse_size(&t).map_err(|e| anyhow!("--{flag}: {e}")))
            .transpose()
    };
    o.offload_bytes_max = size(
        "offload-bytes-max",
        a.offload_bytes_max.or(file.offload_bytes_max),
    )?;
    o.offload_bytes_max_per_store = size(
        "offload-bytes-max-per-store",
        a.offload_bytes_max_per_store
            .or(file.offload_bytes_max_per_store),
    )?;
    if let Some(path) = a.record_trace.or(file.record_trace) {
        let max = size(
            "record-trace-size",
            a.record_trace_size.or(file.record_trace_size),
        )?
        .unwrap_or(256 << 20);
        o.record_trace = Some((path, max));
    } else if a.record_trace_size.is_some() {
        bail!("--record-trace-size needs --record-trace");
    }
    o.store_here = a.store_here.options()?;
    let warmup_log = a.warmup_log.or(file.warmup_log);
    let warmup_size = a.warmup_size.or(file.warmup_size);
    let warmup_algorithm = a.warmup_algorithm.or(file.warmup_algorithm);
    match size("cache-size", a.cache_size.or(file.cache_size))? {
        None => {
            if warmup_log.is_some() || warmup_size.is_some() || warmup_algorithm.is_some() {
                bail!("--warmup-log, --warmup-size and --warmup-algorithm need --cache-size");
            }
        }
        Some(bytes) => {
            if bytes < 4096 {
                bail!("--cache-size must be at least 4k");
            }
            let mut c = CacheOptions::new(bytes);
            c.log = warmup_log;
            c.log_data = a.warmup_data || file.warmup_data;
            if let Some(name) = warmup_algorithm {
                c.algorithm = name
                    .parse()
                    .map_err(|e| anyhow!("--warmup-algorithm: {e}"))?;
            }
            if let Some(b) = size(
                "warmup-log-size",
                a.warmup_log_size.or(file.warmup_log_size),
            )? {
                c.log_bytes = b;
            }
            if let Some(w) = warmup_size {
                c.warmup_bytes = CacheOptions::warmup_bytes_of(&w, bytes)
                    .map_err(|e| anyhow!("--warmup-size: {e}"))?;
            }
            if let Some(b) = size(
                "staging-metadata",
                a.staging_metadata.or(file.staging_metadata),
            )? {
                c.metadata_buffer_bytes = b as usize;
            }
            if let Some(b) = size("staging-data", a.staging_data.or(file.staging_data))? {
                c.data_buffer_bytes = b as usize;
            }
            o.cache = Some(c);
        }
    }
    Ok(o)
}

fn status(a: StatusArgs) -> Result<()> {
    let body = http_get(a.metrics, "/status")?;
    if a.json {
        println!("{body}");
        return Ok(());
    }
    let v: serde_json::Value = serde_json::from_str(&body).context("status document")?;
    print!("{}", cordillera_runtime::volume_server::status_text(&v));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_file_fills_what_flags_leave_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("volume.toml");
        std::fs::write(
            &path,
            "base = \"/tmp/base.img\"\nstore = [\"127.0.0.1:7001\", \"127.0.0.1:7002\"]\nn_way = 2\nt_base = 4\npolicy = \"always\"\nemulate = \"cheetah-15k\"\nfull_timeout_ms = 2500\nstore_timeout_ms = 8000\n",
        )
        .unwrap();
        let o = options(ServeArgs {
            config: Some(path.clone()),
            t_base: Some(8),
            recovery_grace_ms: Some(300),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(o.full_timeout, std::time::Duration::from_millis(2500));
        assert_eq!(o.store_timeout, std::time::Duration::from_millis(8000));
        assert_eq!(o.recovery_grace, std::time::Duration::from_millis(300));
        assert_eq!(o.base, PathBuf::from("/tmp/base.img"));
        assert_eq!(o.stores.len(), 2);
        assert_eq!(o.n_way, 2);
        assert_eq!(o.t_base, 8, "the flag wins");
        assert_eq!(o.policy, Policy::Always);
        assert_eq!(o.emulate.unwrap().preset, "cheetah-15k");
        std::fs::write(&path, "base = \"/x\"\nn_wya = 2\n").unwrap();
        let e = options(ServeArgs {
            config: Some(path),
            ..ServeArgs::default()
        })
        .expect_err("an unknown key is refused");
        assert!(format!("{e:#}").contains("n_wya"), "{e:#}");
        assert!(options(ServeArgs::default()).is_err(), "no base");
    }
}
