//! `cordillera pool`: a storage pool of RAID arrays whose volumes are placed narrow or wide,
//! exported over NBD, and restriped online when an array is added.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use cordillera_models::presets::parse_size;
use cordillera_runtime::pool_server::{
    self, control, CreateVolume, NewArray, PoolOptions, PoolServer, PoolStatus,
};

use cordillera_runtime::http::{http_request, ControlToken};

#[derive(Args)]
pub struct PoolArgs {
    #[command(subcommand)]
    command: PoolCommand,
}

#[derive(Subcommand)]
enum PoolCommand {
    /// Serve the pool: every volume over NBD (export name = volume name), control and
    /// `/status`, `/metrics` over HTTP, restripes in the background.
    Serve(ServeArgs),
    /// Place a new volume (narrow, wide, or as the paper advises) and export it.
    CreateVolume(CreateArgs),
    /// Add an array; every wide volume is restriped onto it online.
    AddArray(AddArrayArgs),
    /// Arrays, volumes, placements, stripe units, restripe progress, utilization, members.
    Status(StatusArgs),
    /// Put a new device in place of a failed member of a member array; it is rebuilt online
    /// (progress below; a restart resumes it).
    ReplaceMember(ReplaceMemberArgs),
    /// Check every row of a member array: parity against data, copies against each other.
    Scrub(ScrubArgs),
    /// Narrow against wide on emulated arrays, and the restripe's copy rate under load.
    Bench(cordillera_harness::pool_bench::PoolBenchArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// The pool's folder (its layout record `pool.layout`).
    #[arg(long)]
    dir: PathBuf,
    /// Arrays of a new pool: each a file or block device holding the array's logical device,
    /// or comma-separated member files or devices (one per disk) on which the pool runs the
    /// RAID itself (created sparse if missing). Omit to reopen the pool in --dir.
    #[arg(long = "array")]
    arrays: Vec<String>,
    /// RAID level of new arrays (for placement and the disk model).
    #[arg(long, default_value = "raid5")]
    level: String,
    /// Disks per new array (RAID-5 4+p: 5); for member arrays, the number of members.
    #[arg(long, default_value_t = 5)]
    disks: usize,
    /// Stripe unit of member arrays (the RAID the pool runs over members).
    #[arg(long, default_value = "64k")]
    unit: String,
    /// Bytes of each disk of a new array (the array holds data disks × this).
    #[arg(long, default_value = "256m")]
    disk_size: String,
    /// Pace each array by a model of its disks: a preset such as `fujitsu-maj3182mc`, run as
    /// the array's level over its disks.
    #[arg(long)]
    emulate: Option<String>,
    /// NBD listen address.
    #[arg(long, default_value = "127.0.0.1:10809")]
    nbd: SocketAddr,
    /// HTTP listen address (control, `/status`, `/metrics`).
    #[arg(long, default_value = "127.0.0.1:10810")]
    http: SocketAddr,
    #[command(flatten)]
    tls: crate::tls_args::TlsArgs,
    /// A file holding the control token (one line, 32+ characters): the HTTP endpoint then
    /// needs `Authorization: Bearer TOKEN` for all but loopback reads (clients: set
    /// `CORDILLERA_CONTROL_TOKEN_FILE`).
    #[arg(long, value_name = "FILE")]
    control_token: Option<PathBuf>,
    /// Bytes per restripe batch (each ends with a sync and a durable cursor; writes to the
    /// batch being copied wait for it). 16 MiB copies at 0.68 of an emulated 4+p array's
    /// streaming rate under load, 4 MiB at 0.37 (`pool bench`).
    #[arg(long, default_value = "16m")]
    batch: String,
    /// Restripe copy rate at most, bytes per second (`0`: unbounded); also bounds a member
    /// rebuild's rate.
    #[arg(long, default_value = "200m")]
    restripe_rate: String,
    /// Serve a member array that stopped uncleanly with a member lost: the rows it names at
    /// start may hold wrong bytes of that member (without this, such an array is refused).
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
struct ReplaceMemberArgs {
    /// The member array (its index in `cordillera pool status`).
    #[arg(long)]
    array: usize,
    /// The failed member's position (0-based).
    #[arg(long)]
    member: usize,
    /// The new device or file (created sparse if missing; its labels are overwritten).
    path: PathBuf,
    #[arg(long, default_value = "127.0.0.1:10810")]
    server: SocketAddr,
    /// Return at once instead of following the rebuild to its end.
    #[arg(long)]
    no_wait: bool,
}

#[derive(Args)]
struct ScrubArgs {
    /// The member array (its index in `cordillera pool status`).
    #[arg(long)]
    array: usize,
    /// Rewrite parity from the data, and copies from the first live one, where they differ.
    #[arg(long)]
    repair: bool,
    #[arg(long, default_value = "127.0.0.1:10810")]
    server: SocketAddr,
}

#[derive(Args)]
struct CreateArgs {
    name: String,
    #[arg(long)]
    size: String,
    /// `wide` (over every array), `narrow` (the least loaded array with room), or `auto` (the
    /// paper's advice for what you declare; it explains its choice).
    #[arg(long, default_value = "wide")]
    policy: String,
    /// The stripe unit; by default half the mean request (nearest power of two), or 32 KiB.
    #[arg(long)]
    stripe_unit: Option<String>,
    #[arg(long)]
    mean_request_bytes: Option<String>,
    /// Expected requests per second.
    #[arg(long)]
    iops: Option<f64>,
    /// Expected fraction of writes (0–1).
    #[arg(long)]
    write_fraction: Option<f64>,
    /// The pool's HTTP address.
    #[arg(long, default_value = "127.0.0.1:10810")]
    server: SocketAddr,
}

#[derive(Args)]
struct AddArrayArgs {
    /// The new array's file or block device, or its comma-separated members (created sparse
    /// if missing).
    path: String,
    /// Bytes per disk (default: as the pool's first array).
    #[arg(long)]
    disk_size: Option<String>,
    #[arg(long, default_value = "127.0.0.1:10810")]
    server: SocketAddr,
}

#[derive(Args)]
struct StatusArgs {
    #[arg(long, default_value = "127.0.0.1:10810")]
    server: SocketAddr,
    #[arg(long)]
    json: bool,
}

pub fn run(a: PoolArgs) -> Result<()> {
    match a.command {
        PoolCommand::Serve(a) => serve(a),
        PoolCommand::CreateVolume(a) => create(a),
        PoolCommand::AddArray(a) => add_array(a),
        PoolCommand::Status(a) => status(a),
        PoolCommand::ReplaceMember(a) => replace_member(a),
        PoolCommand::Scrub(a) => scrub(a),
        PoolCommand::Bench(a) => cordillera_harness::pool_bench::run(a),
    }
}

fn size(text: &str, what: &str) -> Result<u64> {
    parse_size(text).map_err(|e| anyhow!("{what} {text}: {e}"))
}

fn serve(a: ServeArgs) -> Result<()> {
    let disk_bytes = size(&a.disk_size, "--disk-size")?;
    let unit_bytes = size(&a.unit, "--unit")?;
    let arrays: Vec<NewArray> = a
        .arrays
        .iter()
        .map(|p| {
            let paths: Vec<PathBuf> = p.split(',').map(PathBuf::from).collect();
            NewArray {
                disks: if paths.len() > 1 {
                    paths.len()
                } else {
                    a.disks
                },
                paths,
                level: a.level.clone(),
                disk_bytes,
                unit_bytes,
                emulate: a.emulate.clone(),
            }
        })
        .collect();
    let rate = size(&a.restripe_rate, "--restripe-rate")?;
    let options = PoolOptions {
        dir: a.dir.clone(),
        batch_bytes: size(&a.batch, "--batch")?,
        restripe_rate: (rate > 0).then_some(rate),
        force: a.force,
    };
    let token = a.control_token.as_deref().map(ControlToken::read);
    let token = token.transpose()?;
    use cordillera_runtime::tls::{check_ports, HTTP_CREDENTIALS as HTTP, NBD_CREDENTIALS as NBD};
    let require = a.tls.tls == cordillera_wire::nbd::haggle::TlsPolicy::Require;
    let ports = [
        ("NBD", a.nbd, require, NBD),
        ("HTTP", a.http, token.is_some(), HTTP),
    ];
    check_ports(&ports, a.tls.insecure).map_err(anyhow::Error::msg)?;
    let server = PoolServer::open(options, &arrays).map_err(|e| anyhow!(e))?;
    let status = server.status();
    let ready = |nbd, http| {
        eprintln!(
            "cordillera pool: {} array(s), {} volume(s) in {}; NBD at nbd://{nbd} (export = volume name), control at http://{http}/status",
            status.arrays.len(),
            status.volumes.len(),
            a.dir.display(),
        )
    };
    let config = cordillera_runtime::nbd_server::ExportConfig {
        tls: a.tls.nbd()?,
        ..Default::default()
    };
    let result = pool_server::daemon::run(server, a.nbd, a.http, config, token, ready);
    eprintln!("cordillera pool: stopped");
    result
}

fn create(a: CreateArgs) -> Result<()> {
    let c = CreateVolume {
        name: a.name.clone(),
        size_bytes: size(&a.size, "--size")?,
        policy: a.policy.clone(),
        stripe_unit_bytes: a
            .stripe_unit
            .as_deref()
            .map(|s| size(s, "--stripe-unit"))
            .transpose()?,
        mean_request_bytes: a
            .mean_request_bytes
            .as_deref()
            .map(|s| size(s, "--mean-request-bytes"))
            .transpose()?,
        iops: a.iops,
        write_fraction: a.write_fraction,
    };
    print!("{}", control::create_volume(a.server, &c)?);
    Ok(())
}

fn add_array(a: AddArrayArgs) -> Result<()> {
    let disk_bytes = a
        .disk_size
        .as_deref()
        .map(|s| size(s, "--disk-size"))
        .transpose()?;
    print!("{}", control::add_array(a.server, &a.path, disk_bytes)?);
    Ok(())
}

fn replace_member(a: ReplaceMemberArgs) -> Result<()> {
    control::replace_member(a.server, a.array, a.member, &a.path, !a.no_wait)
}

fn scrub(a: ScrubArgs) -> Result<()> {
    print!("{}", control::scrub(a.server, a.array, a.repair)?);
    Ok(())
}

fn status(a: StatusArgs) -> Result<()> {
    let body = http_request(a.server, "GET", "/status")?;
    if a.json {
        println!("{body}");
        return Ok(());
    }
    let s: PoolStatus = serde_json::from_str(&body).context("the pool's status")?;
    print!("{}", s.text());
    Ok(())
}
