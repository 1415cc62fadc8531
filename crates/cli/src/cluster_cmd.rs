//! `cordillera cluster …`: Sierra's daemons and tools.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use cordillera_runtime::sierra::mds::{serve, EtcdOptions, MdsOptions};
use cordillera_runtime::sierra::spec::ClusterSpec;

#[derive(Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Start a local cluster in a directory — the MDS, 3 racks × 2 chunk servers and a logger
    /// per rack, each its own process — print its addresses, and stop it on Ctrl-C.
    Up(UpArgs),
    /// The cluster as a table: servers, racks, power state, gear, primaries, logged bytes.
    Status(StatusArgs),
    /// Print a cluster spec for a local cluster (JSON; edit it, then give it to `cluster mds`).
    Spec(SpecArgs),
    /// Run the MDS (metadata service and gear scheduler) of a cluster.
    Mds(MdsArgs),
    /// Run a chunk server of a cluster (it gets the cluster spec from the MDS).
    Server(ServerArgs),
    /// PostgreSQL's pgbench on ext4 on a cluster object while the gears shift down and up;
    /// the file system is checked afterwards. Needs root, FUSE and PostgreSQL.
    Pgbench(cordillera_harness::cluster_pgbench::ClusterPgbenchArgs),
    /// A compressed diurnal day on a local cluster of emulated disks, in the top gear and with
    /// gear shifting: energy, response times per hour, migrations, logging and reclaim, and
    /// Table 5's throughput.
    Bench(cordillera_harness::cluster_bench::ClusterBenchArgs),
    /// Set the cluster's gear by hand (1 … replicas), or `plan` to follow the spec's plan again.
    Gear(GearArgs),
}

#[derive(Args)]
struct UpArgs {
    /// Where the cluster keeps everything (started again from what is there).
    #[arg(long, default_value = "cordillera-cluster")]
    dir: PathBuf,
    #[command(flatten)]
    layout: SpecArgs,
    /// Disk model for the chunk servers and loggers (e.g. `sierra-1tb`).
    #[arg(long)]
    emulate: Option<String>,
    /// Seconds from a wake request to a server serving again.
    #[arg(long, default_value_t = 1.0)]
    wake_seconds: f64,
    /// Each logger's log size.
    #[arg(long, default_value = "1g")]
    logger_size: String,
    /// MDS processes: more than one keeps the MDS's state in etcd, one active at a time.
    #[arg(long, default_value_t = 1)]
    mds: usize,
    /// etcd members to start for the MDS's state (default: 3 with --mds above 1, else none).
    #[arg(long)]
    etcd: Option<usize>,
    /// The active MDS's lease in etcd, seconds.
    #[arg(long, default_value_t = 5)]
    mds_lease_seconds: u64,
    /// A keys file (psktool's format) for every link of the cluster: the MDS, chunk servers
    /// and loggers started get it (as CORDILLERA_CLUSTER_KEY), and volumes and `cluster gear`
    /// need it too.
    #[arg(long, value_name = "FILE", env = crate::tls_args::CLUSTER_KEY_ENV)]
    cluster_key: Option<PathBuf>,
}

#[derive(Args)]
struct StatusArgs {
    /// The directory of `cluster up` (its spec gives the ports).
    #[arg(long, default_value = "cordillera-cluster")]
    dir: PathBuf,
    /// Or the MDS's HTTP endpoint (`cluster mds --http`); servers' endpoints follow from the
    /// `cluster up` port plan.
    #[arg(long)]
    mds_http: Option<String>,
    /// Print the MDS's status document as JSON instead.
    #[arg(long)]
    json: bool,
}

/// A local cluster's shape and parameters (`cluster spec`, `cluster up`).
#[derive(Args)]
struct SpecArgs {
    #[arg(long, default_value_t = 3)]
    racks: usize,
    #[arg(long, default_value_t = 2)]
    per_rack: u32,
    /// Loggers per rack (logger i on rack i mod racks); a logged write has one copy per rack,
    /// on the least loaded of that rack's loggers.
    #[arg(long, default_value_t = 1)]
    loggers_per_rack: usize,
    /// The MDS listens on this port, chunk servers and loggers on the next ones (their HTTP
    /// endpoints, with `cluster up`, from +100).
    #[arg(long, default_value_t = 7400)]
    base_port: u16,
    /// Seconds in an hour of the gear plan.
    #[arg(long, default_value_t = 3600)]
    hour_seconds: u64,
    /// The gear plan: 24 gears, comma-separated (default: the top gear all day).
    #[arg(long)]
    plan: Option<String>,
    /// Any field of the spec (docs/FORMATS.md), its value JSON or a bare string; repeat:
    /// `--set schedule=learned --set maintenance_hours=[0,1] --set g_min=2`.
    #[arg(long, value_name = "FIELD=VALUE")]
    set: Vec<String>,
    /// Seconds of silence after which a chunk server is declared failed and rebuilt.
    #[arg(long, default_value_t = 900)]
    permanent_after_s: u64,
    /// An up-shift of the plan takes effect this many seconds before its hour (so the servers
    /// it wakes serve when the hour begins) [default: 30, three wake-up delays; `cluster up`:
    /// three of its --wake-seconds].
    #[arg(long)]
    up_shift_lead_s: Option<f64>,
    /// Reclaim as background work: a chunk server starts no reclaim job (at-risk data
    /// excepted) while more than this many other operations are in flight on its disk;
    /// `none` (the default) reclaims whatever the load.
    #[arg(long)]
    reclaim_busy_disk: Option<String>,
}

#[derive(Args)]
struct MdsArgs {
    /// Where the MDS keeps its state (`mds.redb`; with --etcd, nothing).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// The cluster spec (JSON): required at the first start, stored with the state after.
    #[arg(long)]
    spec: Option<PathBuf>,
    /// Listen here instead of the spec's MDS address.
    #[arg(long)]
    listen: Option<String>,
    /// Serve `/metrics` (Prometheus) and `/status` (JSON) here.
    #[arg(long)]
    http: Option<String>,
    /// Keep the state in etcd (its members' client addresses, comma-separated) and take turns
    /// with other MDS processes started the same way: one is active, the others stand by and
    /// take over when its lease lapses. Needs --listen (this MDS's own address, one of the
    /// spec's comma-separated MDS addresses).
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
    /// The keys' prefix in etcd (default: /cordillera/CLUSTER/, the cluster id in hex).
    #[arg(long)]
    etcd_prefix: Option<String>,
    /// The active MDS's lease in etcd, seconds: a standby takes over this long after the
    /// active one stops renewing it.
    #[arg(long, default_value_t = 5)]
    mds_lease_seconds: u64,
    #[command(flatten)]
    cluster_key: crate::tls_args::ClusterKeyArgs,
    /// Listen beyond loopback without `--cluster-key` (logged as a warning).
    #[arg(long)]
    insecure: bool,
}

#[derive(Args)]
struct ServerArgs {
    /// Where the server keeps its chunks (`chunks.dat`, sparse).
    #[arg(long)]
    dir: PathBuf,
    /// The MDS's address.
    #[arg(long)]
    mds: String,
    /// The server's id in the cluster spec (0 …).
    #[arg(long)]
    id: u32,
    /// Checked against the spec's address for this server (the spec decides).
    #[arg(long)]
    listen: Option<String>,
    /// Checked against the spec's rack for this server.
    #[arg(long)]
    rack: Option<String>,
    /// Take, in real time, as long as this modeled disk would for every chunk read and write
    /// (e.g. `sierra-1tb`).
    #[arg(long)]
    emulate: Option<cordillera_runtime::emulate::EmulateSpec>,
    /// Serve `/metrics` (Prometheus) and `/status` (JSON) here.
    #[arg(long)]
    http: Option<String>,
    /// Seconds from a wake request to serving again (the power model's wake-up delay)
    /// [default: 10].
    #[arg(long)]
    wake_seconds: Option<f64>,
    /// I/O to the chunk file: `buffered`, `direct` or `auto`.
    #[arg(long, default_value = "buffered")]
    io: cordillera_runtime::disk::IoMode,
    #[command(flatten)]
    cluster_key: crate::tls_args::ClusterKeyArgs,
    /// Listen beyond loopback without `--cluster-key` (logged as a warning).
    #[arg(long)]
    insecure: bool,
}

#[derive(Args)]
struct GearArgs {
    /// 1 … replicas, or `plan`.
    gear: String,
    /// The MDS's address.
    #[arg(long)]
    mds: String,
    #[command(flatten)]
    cluster_key: crate::tls_args::ClusterKeyArgs,
}

pub fn run(args: ClusterArgs) -> Result<()> {
    match args.command {
        ClusterCommand::Spec(a) => {
            let cluster = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64 | 1);
            let mut spec = ClusterSpec::local(cluster, a.racks, a.per_rack, a.base_port);
            if !(1..=16).contains(&a.loggers_per_rack) {
                bail!("--loggers-per-rack must be 1 to 16");
            }
            spec.loggers =
                ClusterSpec::local_loggers(a.racks, a.per_rack, a.loggers_per_rack, a.base_port);
            spec.hour_seconds = a.hour_seconds;
            spec.permanent_after_s = a.permanent_after_s;
            if let Some(lead) = a.up_shift_lead_s {
                if !(0.0..1e9).contains(&lead) {
                    bail!("--up-shift-lead-s must be 0 or more");
                }
                spec.up_shift_lead_ms = (lead * 1e3) as u64;
            }
            if let Some(b) = &a.reclaim_busy_disk {
                spec.reclaim_busy_disk = match b.as_str() {
                    "none" => None,
                    n => Some(n.parse().map_err(|_| {
                        anyhow!("--reclaim-busy-disk: a number of operations, or none (not {n:?})")
                    })?),
                };
            }
            if let Some(plan) = a.plan {
                spec.plan = plan
                    .split(',')
                    .map(|g| g.trim().parse::<u8>())
                    .collect::<Result<_, _>>()
                    .context("--plan: 24 gears, comma-separated")?;
            }
            let spec = spec.with_settings(&a.set)?;
            println!("{}", spec.to_json());
            Ok(())
        }
        ClusterCommand::Mds(a) => {
            let spec = match &a.spec {
                Some(path) => Some(ClusterSpec::parse(
                    &std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
                )?),
                None => None,
            };
            let options = MdsOptions {
                dir: a.dir,
                spec,
                listen: a.listen,
                http: a.http,
                etcd: (!a.etcd.is_empty()).then_some(EtcdOptions {
                    endpoints: a.etcd,
                    prefix: a.etcd_prefix,
                    lease_s: a.mds_lease_seconds,
                }),
                tls: a.cluster_key.sierra()?,
                insecure: a.insecure,
            };
            if options.etcd.as_ref().is_some_and(|e| e.lease_s < 2) {
                anyhow::bail!("--mds-lease-seconds must be at least 2 (etcd's shortest lease)");
            }
            if let Some(e) = &options.etcd {
                eprintln!(
                    "cordillera cluster mds: standing by for the leadership (etcd {})",
                    e.endpoints.join(",")
                );
            }
            // With etcd, its calls block a thread of their own while the connections go on.
            let threads = if options.etcd.is_some() { 2 } else { 1 };
            crate::serve_until_interrupted(
                threads,
                serve(options, |l| {
                    eprintln!("cordillera cluster mds: listening on {}", l.addr);
                    if let Some(h) = l.http {
                        eprintln!("cordillera cluster mds: metrics on http://{h}/metrics");
                    }
                }),
            )
        }
        ClusterCommand::Server(a) => server(a),
        ClusterCommand::Up(a) => up(a),
        ClusterCommand::Status(a) => status(a),
        ClusterCommand::Gear(a) => gear(a),
        ClusterCommand::Pgbench(a) => cordillera_harness::cluster_pgbench::run_cluster_pgbench(a),
        ClusterCommand::Bench(a) => cordillera_harness::cluster_bench::run(a),
    }
}

fn server(a: ServerArgs) -> Result<()> {
    use cordillera_runtime::sierra::server::{serve, ServerOptions};
    let mut power = cordillera_models::power::PowerParams::default();
    if let Some(s) = a.wake_seconds {
        if !(0.0..=3600.0).contains(&s) {
            bail!("--wake-seconds must be 0 to 3600");
        }
        power.wake_from_standby_ns = (s * 1e9) as u64;
    }
    let options = ServerOptions {
        dir: a.dir,
        mds: a.mds,
        id: a.id,
        listen: a.listen,
        rack: a.rack,
        emulate: a.emulate,
        http: a.http,
        io: a.io,
        power,
        tls: a.cluster_key.sierra()?,
        insecure: a.insecure,
    };
    crate::serve_until_interrupted(
        2,
        serve(options, |l| {
            eprintln!("cordillera cluster server: listening on {}", l.addr);
            if let Some(h) = l.http {
                eprintln!("cordillera cluster server: metrics on http://{h}/metrics");
            }
        }),
    )
}

fn gear(a: GearArgs) -> Result<()> {
    let tls = a.cluster_key.sierra()?;
    let ask = cordillera_runtime::sierra::net::shift_gear(&a.mds, tls.as_ref(), &a.gear);
    println!("{}", crate::block_on(1, ask)?);
    Ok(())
}

fn up(a: UpArgs) -> Result<()> {
    use cordillera_procs::cluster::{ClusterOptions, LocalCluster};
    let binary = std::env::current_exe().context("the path of this program")?;
    let options = ClusterOptions {
        racks: a.layout.racks,
        per_rack: a.layout.per_rack,
        loggers_per_rack: a.layout.loggers_per_rack,
        base_port: Some(a.layout.base_port),
        hour_seconds: a.layout.hour_seconds,
        plan: a.layout.plan,
        emulate: a.emulate,
        wake_seconds: a.wake_seconds,
        logger_size: a.logger_size,
        permanent_after_s: a.layout.permanent_after_s,
        up_shift_lead_s: a.layout.up_shift_lead_s,
        reclaim_busy_disk: a.layout.reclaim_busy_disk,
        spec_settings: a.layout.set,
        mds: a.mds.max(1),
        etcd: a.etcd.unwrap_or(if a.mds > 1 { 3 } else { 0 }),
        mds_lease_s: a.mds_lease_seconds,
    };
    let key = a
        .cluster_key
        .as_deref()
        .map(cluster_key_for_daemons)
        .transpose()?;
    eprintln!("cordillera cluster: starting in {}", a.dir.display());
    let mut cluster = LocalCluster::start(&binary, &a.dir, options).map_err(|e| anyhow!(e))?;
    print!("{}", cluster.describe(&a.dir));
    if let Some(key) = key {
        println!(
            "every link inside TLS with the keys in {0}: volumes and `cluster gear` need --cluster-key {0}",
            key.display()
        );
    }
    eprintln!("cordillera cluster: up; Ctrl-C stops it");
    let stop = cordillera_runtime::signals::stop_flag()?;
    let result = cluster.supervise(&stop).map_err(|e| anyhow!(e));
    eprintln!("cordillera cluster: stopping");
    cluster.stop();
    result
}

/// Checks the keys file and hands it to the daemons `cluster up` starts: they inherit its
/// environment, where `--cluster-key` falls back to CORDILLERA_CLUSTER_KEY (an absolute path:
/// they run in directories of their own).
fn cluster_key_for_daemons(path: &std::path::Path) -> Result<PathBuf> {
    cordillera_runtime::sierra::net::ClusterTls::from_keys(path, None)
        .map_err(anyhow::Error::msg)?;
    let path =
        std::fs::canonicalize(path).with_context(|| format!("the keys file {}", path.display()))?;
    std::env::set_var(crate::tls_args::CLUSTER_KEY_ENV, &path);
    Ok(path)
}

fn status(a: StatusArgs) -> Result<()> {
    let (mds_http, body, loggers) =
        cordillera_procs::cluster::active_mds_status(&a.dir, a.mds_http.as_deref())
            .map_err(|e| anyhow!(e))?;
    if a.json {
        println!("{body}");
        return Ok(());
    }
    print!(
        "{}",
        cordillera_procs::cluster::status_text(&mds_http, &body, loggers)
            .map_err(|e| anyhow!(e))?
    );
    Ok(())
}
