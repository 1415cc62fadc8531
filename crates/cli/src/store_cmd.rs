//! `cordillera store …`: the versioned store on a file or block device.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use cordillera_models::presets::parse_size;
use cordillera_runtime::disk::IoMode;
use cordillera_runtime::store_server::{
    check_exposure, create_store, peers_file, serve, ServeOptions, StoreAuth,
};

#[derive(Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    command: StoreCommand,
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Create and format a store file.
    Format(FormatArgs),
    /// Serve a store over TCP (formats a new file when it does not exist).
    Serve(ServeArgs),
    /// Print the superblock, the log extent and every client's valid ranges, verifying every
    /// record from the tail to the head.
    Inspect(InspectArgs),
    /// Measure the store against fio on the same file system (four ratios).
    Bench(cordillera_harness::store_bench::StoreBenchArgs),
}

#[derive(Args)]
struct FormatArgs {
    #[arg(long)]
    path: PathBuf,
    /// Size of the log (e.g. 1g, 256m).
    #[arg(long)]
    size: String,
    /// Do not fill the log with zeros: creating is instant, but the file system allocates blocks
    /// during the first lap of writes (slower durable writes), and a full file system can then
    /// refuse a write to the log.
    #[arg(long)]
    sparse: bool,
}

#[derive(Args)]
struct ServeArgs {
    #[arg(long)]
    path: PathBuf,
    /// Log size of a new store (ignored for an existing one).
    #[arg(long, default_value = "1g")]
    size: String,
    #[arg(long, default_value = "127.0.0.1:7300")]
    listen: SocketAddr,
    /// Interval of unprompted load broadcasts to connected clients, in ms.
    #[arg(long, default_value_t = 1000)]
    broadcast_ms: u64,
    /// I/O to the file or device: `direct` (O_DIRECT), `buffered` (page cache), or `auto`
    /// (O_DIRECT where the file system supports it).
    #[arg(long, default_value = "auto")]
    io: IoMode,
    /// Leave the log of a new store sparse instead of filling it with zeros (as `format --sparse`).
    #[arg(long)]
    sparse: bool,
    /// Take, in real time, as long as this modeled device would for every read and write
    /// (`cheetah-15k`, any `sim` preset, or an array: `cheetah-15k@raid0:4`). See docs/USAGE.md.
    #[arg(long)]
    emulate: Option<cordillera_runtime::emulate::EmulateSpec>,
    #[command(flatten)]
    limits: crate::limit_args::LimitArgs,
    /// Serve `/metrics` (Prometheus) and `/status` (JSON) here: queue length, requests per
    /// second, log use, records written.
    #[arg(long)]
    http: Option<String>,
    /// A label the figures carry (a Sierra logger's rack, as the cluster spec names it).
    #[arg(long)]
    rack: Option<String>,
    #[command(flatten)]
    cluster_key: crate::tls_args::ClusterKeyArgs,
    /// With `--cluster-key`: the file recording which identity owns each client id
    /// [default: the store's path with `.peers` appended].
    #[arg(long, value_name = "FILE", requires = "cluster_key")]
    peers: Option<PathBuf>,
    /// Listen (or serve `--http`) beyond loopback without credentials (logged as a warning);
    /// refused otherwise.
    #[arg(long)]
    insecure: bool,
}

#[derive(Args)]
struct InspectArgs {
    #[arg(long)]
    path: PathBuf,
    #[arg(long)]
    json: bool,
}

pub fn run(args: StoreArgs) -> Result<()> {
    match args.command {
        StoreCommand::Format(a) => {
            if a.path.exists() {
                bail!(
                    "{} exists; formatting would destroy it (remove it first)",
                    a.path.display()
                );
            }
            let log_bytes = parse_size(&a.size).map_err(anyhow::Error::msg)?;
            let (_, store) = create_store(&a.path, log_bytes, 1, IoMode::Buffered, a.sparse)?;
            println!(
                "formatted {}: store {:032x}, log {} bytes",
                a.path.display(),
                store.store_id(),
                store.log_bytes()
            );
            Ok(())
        }
        StoreCommand::Serve(a) => {
            let auth = match a.cluster_key.server()? {
                Some(tls) => Some(StoreAuth {
                    tls,
                    peers: peers_file(&a.path, a.peers.as_deref()).map_err(anyhow::Error::msg)?,
                }),
                None => None,
            };
            check_exposure(a.listen, a.http.as_deref(), auth.is_some(), a.insecure)
                .map_err(anyhow::Error::msg)?;
            let options = ServeOptions {
                path: a.path,
                log_bytes: parse_size(&a.size).map_err(anyhow::Error::msg)?,
                listen: a.listen,
                broadcast: Duration::from_millis(a.broadcast_ms.max(1)),
                io: a.io,
                sparse: a.sparse,
                stats: None,
                emulate: a.emulate,
                emulator: None,
                limits: a.limits.limits()?,
                http: a.http,
                rack: a.rack,
                power: Default::default(),
                auth,
            };
            // One event thread: the store core is a single task, and hand-offs between runtime
            // threads would only add wake-ups to every request (disk I/O has its own threads).
            crate::block_on(
                1,
                serve(options, |addr| {
                    eprintln!("cordillera store: listening on {addr}")
                }),
            )
        }
        StoreCommand::Inspect(a) => inspect(a),
        StoreCommand::Bench(a) => cordillera_harness::store_bench::run(a),
    }
}

fn inspect(a: InspectArgs) -> Result<()> {
    print!(
        "{}",
        cordillera_runtime::store_server::inspect(&a.path, a.json)?
    );
    Ok(())
}
