//! `cordillera chaos`: a kill campaign against real processes. It starts a volume server with
//! its stores (N-way 1 with a roomy or a small store, N-way 2 over three stores), drives
//! patterned writes (4–64 KiB, some with FUA, flushes between) and reads through the NBD export,
//! SIGKILLs a volume server or a store at random moments, restarts it, and after every kill
//! reads the whole region back and checks every block against the ledger of acknowledged
//! writes. With N-way 2 it also restarts the volume while a store is down (the volume must serve
//! within seconds from the other copies, unless its superblock is marked degraded — a write was
//! acknowledged with fewer than N copies — when it must wait for that store) and damages a stopped store's log (flipped bytes, a zeroed range, a cut tail)
//! before restarting it (reads must stay correct from the other copy). It also stalls a store or
//! the volume server (SIGSTOP, then SIGCONT 0.3–5 s later) mid-load: a stalled store's
//! connection holds what it was sent and delivers it late, in order.
//!
//! Every fifth cluster is instead a pool over a RAID-5 member array with one member under
//! nbdkit's error filter (`pool.rs`): the member returns EIO, its device stalls, a member file
//! is lost while the pool is stopped, replacements are rebuilt (and SIGKILLed mid-rebuild), and
//! after an unclean stop a scrub must find every row consistent.
//!
//! The seed fixes the plan (clusters, events, their timing, the requests); the processes'
//! interleaving is the machine's, so a seed replays the plan, not the exact schedule.

mod cluster;
mod pool;
mod workload;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use cluster::{damage, kill_later, stall_later, Cluster, Kind};
use workload::{drive, verify, Figures, Ledger, Rng};

const BLOCK: u64 = 4096;

#[derive(clap::Args)]
pub struct ChaosArgs {
    /// How long the campaign runs (it finishes the event in progress).
    #[arg(long, default_value_t = 1.0)]
    minutes: f64,
    /// Seed of the plan (default: drawn from the clock; printed, with how to run it again).
    #[arg(long)]
    seed: Option<u64>,
    /// Work directory for the stores, base volumes and logs (default: a temporary one,
    /// removed at the end unless something was lost).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Size of the region written and checked, in 4 KiB blocks.
    #[arg(long, default_value_t = 4096)]
    blocks: u64,
    /// Requests in flight.
    #[arg(long, default_value_t = 16)]
    depth: usize,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// xorshift64*: the plan's randomness.
#[derive(Default)]
struct Campaign {
    clusters: u64,
    kills_volume: u64,
    kills_store: u64,
    kills_both: u64,
    damaged: u64,
    /// Processes stopped (SIGSTOP) for a while mid-load, then continued: stores, some past
    /// the volume's request timeout, and volume servers.
    stalls: u64,
    /// Store links stalled past the request timeout (then delivered in order), and dropped.
    link_stalls: u64,
    link_cuts: u64,
    figures: Figures,
    /// Seconds from restarting the volume to its export, with a store down (N-way 2).
    restart_with_store_down: Vec<f64>,
    /// The same restarts that had to wait for the down store (the superblock was marked
    /// degraded: some acknowledged write had fewer than N copies), timed to the export.
    restart_waited_for_store: Vec<f64>,
    restart: Vec<f64>,
    pool: pool::PoolFigures,
}

pub fn run(args: ChaosArgs) -> Result<()> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let minutes = args.minutes;
    if minutes.is_nan() || minutes <= 0.0 {
        bail!("--minutes must be positive");
    }
    if args.blocks < 64 || args.depth == 0 {
        bail!("--blocks must be at least 64 and --depth at least 1");
    }
    let temp;
    let root = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => {
            temp = tempfile::tempdir()?;
            temp.path().to_path_buf()
        }
    };
    eprintln!(
        "cordillera chaos: seed {seed}, {minutes} min, {} blocks at depth {}; plan again with: cordillera chaos --seed {seed} --minutes {minutes}",
        args.blocks, args.depth
    );
    let deadline = Instant::now() + Duration::from_secs_f64(minutes * 60.0);
    let mut rng = Rng(seed | 1);
    let mut c = Campaign::default();
    let kinds = [Kind::Two, Kind::One, Kind::Two, Kind::SmallStore];
    let mut outcome = Ok(());
    while Instant::now() < deadline && outcome.is_ok() {
        let dir = root.join(format!("cluster{}", c.clusters));
        // Every fifth cluster is a pool over a member array with a device that fails.
        if c.clusters % 5 == 1 {
            c.clusters += 1;
            outcome =
                pool::campaign_pool(&dir, &args, &mut rng, deadline, &mut c.figures, &mut c.pool)
                    .with_context(|| {
                        format!("cluster {} (pool), in {}", c.clusters, dir.display())
                    });
            if outcome.is_ok() {
                let _ = std::fs::remove_dir_all(&dir);
            }
            continue;
        }
        let kind = kinds[(c.clusters % kinds.len() as u64) as usize];
        c.clusters += 1;
        outcome =
            campaign_cluster(kind, &dir, &args, &mut rng, deadline, &mut c).with_context(|| {
                format!(
                    "cluster {} ({}), in {}",
                    c.clusters,
                    kind.name(),
                    dir.display()
                )
            });
        if outcome.is_ok() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    if args.json {
        print_json(&c, seed, minutes, outcome.as_ref().err())?;
    } else {
        print_text(&c, seed);
    }
    match outcome {
        Ok(()) => {
            if !args.json {
                println!("no acknowledged write lost");
            }
            Ok(())
        }
        Err(e) => {
            if args.dir.is_none() {
                // Keep the evidence.
                let kept = std::env::temp_dir().join(format!("cordillera-chaos-{seed}"));
                let _ = std::fs::rename(&root, &kept);
                eprintln!("cordillera chaos: logs and data kept in {}", kept.display());
            }
            Err(e.context(format!(
                "reproduce the plan: cordillera chaos --seed {seed} --minutes {minutes}"
            )))
        }
    }
}

/// Drives the load on the cluster's export for `span`; `Ok(false)` when the volume server died.
fn load_for(
    cluster: &Cluster,
    ledger: &mut Ledger,
    rng: &mut Rng,
    depth: usize,
    span: Duration,
    figures: &mut Figures,
) -> Result<bool> {
    drive(
        cluster.nbd(),
        ledger,
        rng,
        depth,
        Instant::now() + span,
        figures,
    )
}

/// The same, where the volume server must survive (`when`: what just happened).
fn load_alive(
    cluster: &Cluster,
    ledger: &mut Ledger,
    rng: &mut Rng,
    depth: usize,
    span: Duration,
    figures: &mut Figures,
    when: &str,
) -> Result<()> {
    if !load_for(cluster, ledger, rng, depth, span, figures)? {
        bail!(
            "the volume server died {when} (see {})",
            cluster.dir.join("volume.stderr").display()
        );
    }
    Ok(())
}

fn campaign_cluster(
    kind: Kind,
    dir: &Path,
    args: &ChaosArgs,
    rng: &mut Rng,
    deadline: Instant,
    c: &mut Campaign,
) -> Result<()> {
    let mut cluster = Cluster::start(kind, dir.to_path_buf(), args.blocks)?;
    let mut ledger = Ledger::new(args.blocks);
    let events = 4 + rng.below(5);
    for _ in 0..events {
        if Instant::now() >= deadline {
            break;
        }
        let load = rng.millis(300, 2500);
        let roll = rng.below(100);
        match (kind, roll) {
            (_, 0..=44) => {
                // The volume server, mid-load.
                let pid = cluster.volume.as_ref().expect("volume").0.pid();
                let killer = kill_later(pid, rng.millis(100, load.as_millis() as u64));
                load_for(&cluster, &mut ledger, rng, args.depth, load, &mut c.figures)?;
                killer.join().expect("killer");
                cluster.volume.take().expect("volume").0.kill();
                c.kills_volume += 1;
                let took = cluster.start_volume(&[])?;
                c.restart.push(took.as_secs_f64());
                verify(cluster.nbd(), &mut ledger, &mut c.figures)
                    .context("after a volume server SIGKILL")?;
            }
            (Kind::Two, 45..=64) => {
                kill_volume_and_store(&mut cluster, &mut ledger, rng, args.depth, c, load)?
            }
            (Kind::Two, 65..=79) => {
                kill_and_damage_store(&mut cluster, &mut ledger, rng, args.depth, c, dir, load)?
            }
            (_, 80..=89) if rng.chance(0.5) => {
                stall_or_cut_link(&mut cluster, &mut ledger, rng, args.depth, c, load)?
            }
            (_, 80..=89) => stop_process(&mut cluster, &mut ledger, rng, args.depth, c, load)?,
            _ => kill_store(&mut cluster, &mut ledger, rng, args.depth, c, dir, load)?,
        }
    }
    for s in cluster.stores.iter_mut().flatten() {
        s.kill();
    }
    if let Some((v, _)) = cluster.volume.as_mut() {
        v.kill();
    }
    Ok(())
}

/// The volume server and a store killed at once: the volume restarts at once and must serve
/// from the other copies (or waits for the store, when its superblock says it may hold the only
/// copy of a write); the store comes back later.
fn kill_volume_and_store(
    cluster: &mut Cluster,
    ledger: &mut Ledger,
    rng: &mut Rng,
    depth: usize,
    c: &mut Campaign,
    load: Duration,
) -> Result<()> {
    let n = cluster.stores.len();
    let s = rng.below(n as u64) as usize;
    let pid = cluster.volume.as_ref().expect("volume").0.pid();
    let at = rng.millis(100, load.as_millis() as u64);
    let killer = kill_later(pid, at);
    let store_pid = cluster.stores[s].as_ref().expect("store").pid();
    let store_killer = kill_later(store_pid, at);
    load_for(cluster, ledger, rng, depth, load, &mut c.figures)?;
    killer.join().expect("killer");
    store_killer.join().expect("killer");
    cluster.volume.take().expect("volume").0.kill();
    cluster.stores[s].take().expect("store").kill();
    c.kills_both += 1;
    let (took, needed_store) = cluster.start_volume_with_store_down(s, Duration::from_secs(15))?;
    if needed_store {
        // The superblock was marked degraded: the down store may hold the only copy
        // of a write, so the volume waited for it.
        c.restart_waited_for_store.push(took.as_secs_f64());
        verify(cluster.nbd(), ledger, &mut c.figures)
            .context("after a restart that waited for the down store")?;
        return Ok(());
    }
    c.restart_with_store_down.push(took.as_secs_f64());
    verify(cluster.nbd(), ledger, &mut c.figures).context("after a restart with a store down")?;
    let more = rng.millis(300, 1500);
    load_alive(
        cluster,
        ledger,
        rng,
        depth,
        more,
        &mut c.figures,
        "while a store was down",
    )?;
    cluster.start_store(s)?;
    verify(cluster.nbd(), ledger, &mut c.figures).context("after the store returned")?;
    Ok(())
}

/// A store killed mid-load, its log damaged while it is down.
fn kill_and_damage_store(
    cluster: &mut Cluster,
    ledger: &mut Ledger,
    rng: &mut Rng,
    depth: usize,
    c: &mut Campaign,
    dir: &Path,
    load: Duration,
) -> Result<()> {
    let n = cluster.stores.len();
    let s = rng.below(n as u64) as usize;
    let pid = cluster.stores[s].as_ref().expect("store").pid();
    let killer = kill_later(pid, rng.millis(100, load.as_millis() as u64));
    load_alive(
        cluster,
        ledger,
        rng,
        depth,
        load,
        &mut c.figures,
        "when a store did",
    )?;
    killer.join().expect("killer");
    cluster.stores[s].take().expect("store").kill();
    c.kills_store += 1;
    let how = damage(&cluster.store_path(s), rng)?;
    c.damaged += 1;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("events.log"))?
        .write_all(format!("store {} damaged: {how}\n", s + 1).as_bytes())?;
    cluster.start_store(s)?;
    let more = Instant::now() + rng.millis(300, 1500);
    drive(cluster.nbd(), ledger, rng, depth, more, &mut c.figures)?;
    verify(cluster.nbd(), ledger, &mut c.figures)
        .with_context(|| format!("after store {} was damaged ({how})", s + 1))?;
    Ok(())
}

/// A store's link stalls mid-load (its proxy holds every byte for 0.3-8 s, past the volume's
/// 3 s store request timeout, then delivers them in order) or drops (every connection through
/// it closed); the store itself runs on.
fn stall_or_cut_link(
    cluster: &mut Cluster,
    ledger: &mut Ledger,
    rng: &mut Rng,
    depth: usize,
    c: &mut Campaign,
    load: Duration,
) -> Result<()> {
    let n = cluster.stores.len();
    let s = rng.below(n as u64) as usize;
    let at = rng.millis(100, load.as_millis() as u64);
    let stalled = rng.millis(300, 8000);
    let cut = rng.chance(0.3);
    let span = load.max(at + stalled + Duration::from_millis(200));
    let addr = cluster.nbd();
    let link = &cluster.links[s];
    std::thread::scope(|scope| -> Result<()> {
        let load = scope.spawn(|| {
            drive(
                addr,
                ledger,
                rng,
                depth,
                Instant::now() + span,
                &mut c.figures,
            )
        });
        std::thread::sleep(at);
        if cut {
            link.cut();
        } else {
            link.pause_for(stalled).join().expect("link");
        }
        if !load.join().expect("load")? {
            bail!(
                "the volume server died when a store's link {}",
                if cut { "dropped" } else { "stalled" }
            );
        }
        Ok(())
    })?;
    if cut {
        c.link_cuts += 1;
    } else {
        c.link_stalls += 1;
    }
    verify(cluster.nbd(), ledger, &mut c.figures).with_context(|| {
        format!(
            "after store {}'s link {}",
            s + 1,
            if cut {
                "dropped"
            } else {
                "stalled for {stalled:?}"
            }
        )
    })?;
    Ok(())
}

/// A process stopped mid-load (SIGSTOP for 0.3-5 s, then SIGCONT): a store (past the volume's
/// 3 s store request timeout it counts as failed, and what it was sent arrives late, in order)
/// or the volume server itself (its clients wait).
fn stop_process(
    cluster: &mut Cluster,
    ledger: &mut Ledger,
    rng: &mut Rng,
    depth: usize,
    c: &mut Campaign,
    load: Duration,
) -> Result<()> {
    let n = cluster.stores.len();
    let target = rng.below(n as u64 + 1) as usize;
    let pid = if target < n {
        cluster.stores[target].as_ref().expect("store").pid()
    } else {
        cluster.volume.as_ref().expect("volume").0.pid()
    };
    let at = rng.millis(100, load.as_millis() as u64);
    let stalled = rng.millis(300, 5000);
    let staller = stall_later(pid, at, stalled);
    load_alive(
        cluster,
        ledger,
        rng,
        depth,
        load.max(at + stalled + Duration::from_millis(200)),
        &mut c.figures,
        "when a process stalled",
    )?;
    staller.join().expect("staller");
    c.stalls += 1;
    verify(cluster.nbd(), ledger, &mut c.figures).with_context(|| {
        format!(
            "after {} stalled for {stalled:?}",
            if target < n {
                "a store"
            } else {
                "the volume server"
            }
        )
    })?;
    Ok(())
}

/// A store killed mid-load, back after a while; the volume keeps serving.
fn kill_store(
    cluster: &mut Cluster,
    ledger: &mut Ledger,
    rng: &mut Rng,
    depth: usize,
    c: &mut Campaign,
    dir: &Path,
    load: Duration,
) -> Result<()> {
    let n = cluster.stores.len();
    let s = rng.below(n as u64) as usize;
    let pid = cluster.stores[s].as_ref().expect("store").pid();
    let at = rng.millis(100, load.as_millis() as u64);
    let killer = kill_later(pid, at);
    let down = rng.millis(200, 2000);
    let store_path_log = dir.join("volume.stderr");
    let until = Instant::now() + load.max(at + down);
    // The store is restarted while the load runs: N-way 1 reads of data only there
    // wait for it.
    let restart_at = Instant::now() + at + down;
    let addr = cluster.nbd();
    let handle = std::thread::scope(|scope| -> Result<bool> {
        let load = scope.spawn(|| drive(addr, ledger, rng, depth, until, &mut c.figures));
        killer.join().expect("killer");
        let wait = restart_at.saturating_duration_since(Instant::now());
        std::thread::sleep(wait);
        cluster.stores[s].take().expect("store").kill();
        cluster.start_store(s)?;
        load.join().expect("load")
    })?;
    c.kills_store += 1;
    if !handle {
        bail!(
            "the volume server died when a store did (see {})",
            store_path_log.display()
        );
    }
    verify(cluster.nbd(), ledger, &mut c.figures).context("after a store SIGKILL")?;
    Ok(())
}

/// The campaign's counts as JSON, with the loss if one was found.
fn print_json(c: &Campaign, seed: u64, minutes: f64, loss: Option<&anyhow::Error>) -> Result<()> {
    let f = &c.figures;
    let mean_max = |v: &Vec<f64>| {
        serde_json::json!({
            "count": v.len(),
            "mean_seconds": if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 },
            "max_seconds": v.iter().copied().fold(0.0, f64::max),
        })
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "seed": seed,
            "minutes": minutes,
            "clusters": c.clusters,
            "kills": {
                "volume": c.kills_volume,
                "store": c.kills_store,
                "volume_and_store": c.kills_both,
                "total": c.kills_volume + c.kills_store + 2 * c.kills_both,
            },
            "damaged_store_logs": c.damaged,
            "pool": {
                "clusters": c.pool.clusters,
                "kills": c.pool.kills,
                "kills_mid_rebuild": c.pool.kills_mid_rebuild,
                "member_eio": c.pool.member_eio,
                "device_stalls": c.pool.device_stalls,
                "members_lost": c.pool.members_lost,
                "rebuilds": c.pool.rebuilds,
                "scrubs_after_unclean_stop": c.pool.scrubs_after_unclean_stop,
            },
            "stalls": c.stalls,
            "store_links_stalled": c.link_stalls,
            "store_links_dropped": c.link_cuts,
            "writes_acknowledged": f.writes_acked,
            "fua_writes": f.fua_writes,
            "flushes": f.flushes,
            "reads_checked": f.reads_checked,
            "refused_writes": f.refused_writes,
            "blocks_verified": f.blocks_verified,
            "restarts": mean_max(&c.restart),
            "restarts_with_a_store_down": mean_max(&c.restart_with_store_down),
            "restarts_that_waited_for_the_down_store": mean_max(&c.restart_waited_for_store),
            "loss": loss.map(|e| format!("{e:#}")),
        }))?
    );
    Ok(())
}

/// The campaign's counts in words.
fn print_text(c: &Campaign, seed: u64) {
    let f = &c.figures;
    let stat = |v: &Vec<f64>| {
        if v.is_empty() {
            "none".to_string()
        } else {
            let max = v.iter().copied().fold(0.0, f64::max);
            format!(
                "{} (mean {:.2} s, max {:.2} s)",
                v.len(),
                v.iter().sum::<f64>() / v.len() as f64,
                max
            )
        }
    };
    println!("chaos campaign, seed {seed}: {} clusters", c.clusters);
    println!(
        "  kills: {} volume servers, {} stores, {} volume server and store together ({} processes)",
        c.kills_volume,
        c.kills_store,
        c.kills_both,
        c.kills_volume + c.kills_store + 2 * c.kills_both
    );
    println!("  damaged store logs (N-way 2): {}", c.damaged);
    let p = &c.pool;
    println!(
        "  pools over a RAID-5 member array: {} ({} SIGKILLs, {} mid-rebuild; a member returning EIO {} times, its device stalled {} times; {} member files lost; {} rebuilds; {} scrubs after an unclean stop, all consistent)",
        p.clusters,
        p.kills,
        p.kills_mid_rebuild,
        p.member_eio,
        p.device_stalls,
        p.members_lost,
        p.rebuilds,
        p.scrubs_after_unclean_stop
    );
    println!(
        "  processes stalled (SIGSTOP, then SIGCONT) mid-load: {}",
        c.stalls
    );
    println!(
        "  store links stalled past the request timeout (a proxy holding every byte 0.3-8 s): {}, dropped: {}",
        c.link_stalls, c.link_cuts
    );
    println!(
        "  writes acknowledged: {} ({} with FUA), flushes {}, reads checked during the load {}, writes refused (ENOSPC) {}",
        f.writes_acked, f.fua_writes, f.flushes, f.reads_checked, f.refused_writes
    );
    println!(
        "  blocks read back and checked after kills: {}",
        f.blocks_verified
    );
    println!("  volume restarts: {}", stat(&c.restart));
    println!(
        "  volume restarts with a store down (N-way 2): {}",
        stat(&c.restart_with_store_down)
    );
    println!(
        "  volume restarts with a store down that waited for it (superblock degraded): {}",
        stat(&c.restart_waited_for_store)
    );
}
