//! The pool's part of the chaos campaign: a `pool serve` over a RAID-5 4+p member array, one
//! member of which is a file served by nbdkit through its `error` filter and mounted by nbdfuse
//! (so EIO can be turned on under it, and its nbdkit stopped to stall the device). Events,
//! under load: SIGKILL of the pool; the member returning EIO (the pool must fail it and serve
//! on, the client seeing no error), then replaced by the same device healed and rebuilt, with
//! a SIGKILL mid-rebuild half the time; the device stalled for 0.3–4 s; a member file lost
//! while the pool is down (served degraded, then replaced); an unclean stop mid-write followed
//! by a scrub that must find every row consistent. After each, the whole region is read back
//! against the ledger of acknowledged writes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cordillera_faults::FaultyDevice;

use super::cluster::{free_port, kill_later, stall_later, Proc};
use super::workload::{drive, verify, Figures, Ledger, Rng, Target};
use super::{ChaosArgs, BLOCK};
use cordillera_runtime::http::http_request;

const READY: &str = "cordillera pool: 1 array(s)";
const MEMBERS: usize = 5;

/// What the pool's events did.
#[derive(Default)]
pub(super) struct PoolFigures {
    pub(super) clusters: u64,
    pub(super) kills: u64,
    pub(super) kills_mid_rebuild: u64,
    pub(super) member_eio: u64,
    pub(super) device_stalls: u64,
    pub(super) members_lost: u64,
    pub(super) rebuilds: u64,
    pub(super) scrubs_after_unclean_stop: u64,
}

struct PoolCluster {
    dir: PathBuf,
    members: Vec<PathBuf>,
    faulty: Option<(usize, FaultyDevice)>,
    pool: Option<Proc>,
    nbd: SocketAddr,
    http: SocketAddr,
    volume_bytes: u64,
}

impl PoolCluster {
    fn start(dir: &Path, blocks: u64, rng: &mut Rng) -> Result<PoolCluster> {
        std::fs::create_dir_all(dir)?;
        let volume_bytes = (blocks * BLOCK).div_ceil(1 << 20) << 20;
        // 4 data members hold the volume with room to spare.
        let disk = (volume_bytes / 4).div_ceil(1 << 20).max(4) << 20;
        let mut members: Vec<PathBuf> = (0..MEMBERS).map(|i| dir.join(format!("m{i}"))).collect();
        let faulty = if FaultyDevice::available() {
            let i = rng.below(MEMBERS as u64) as usize;
            let area = cordillera_runtime::pool_server::member_area(64 << 10).data_offset();
            let m = FaultyDevice::start(
                dir,
                &dir.join("faulty-backing"),
                area + disk,
                &["error-rate=100%"],
            )
            .context("a member under nbdkit")?;
            members[i] = m.path();
            Some((i, m))
        } else {
            None
        };
        let mut c = PoolCluster {
            dir: dir.to_path_buf(),
            members,
            faulty,
            pool: None,
            nbd: free_port()?,
            http: free_port()?,
            volume_bytes,
        };
        let list = c
            .members
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>();
        c.serve(&[
            "--array".into(),
            list.join(","),
            "--disk-size".into(),
            disk.to_string(),
            "--unit".into(),
            "64k".into(),
        ])?;
        http_request(
            c.http,
            "POST",
            &format!("/volumes?name=v&size={}&policy=wide", c.volume_bytes),
        )?;
        Ok(c)
    }

    fn serve(&mut self, extra: &[String]) -> Result<()> {
        let mut args: Vec<String> = vec![
            "pool".into(),
            "serve".into(),
            "--dir".into(),
            self.dir.join("meta").display().to_string(),
            "--nbd".into(),
            self.nbd.to_string(),
            "--http".into(),
            self.http.to_string(),
            "--restripe-rate".into(),
            "64m".into(),
        ];
        args.extend(extra.iter().cloned());
        let (p, _) = Proc::start(&args, &self.dir.join("pool.stderr"), READY)?;
        self.pool = Some(p);
        Ok(())
    }

    fn target(&self) -> Target {
        Target {
            addr: self.nbd,
            export: "v",
        }
    }

    fn kill(&mut self) {
        if let Some(mut p) = self.pool.take() {
            p.kill();
        }
    }

    /// A clean stop (SIGTERM): the arrays synced and their labels marked clean.
    fn stop(&mut self) {
        if let Some(mut p) = self.pool.take() {
            p.stop();
        }
    }

    /// Load for `load`, the pool SIGKILLed at a random moment of it (at least `lo` ms in), then
    /// started again.
    fn kill_mid_load(
        &mut self,
        ledger: &mut Ledger,
        rng: &mut Rng,
        depth: usize,
        load: Duration,
        lo: u64,
        figures: &mut Figures,
    ) -> Result<()> {
        let pid = self.pool.as_ref().expect("pool").pid();
        let killer = kill_later(pid, rng.millis(lo, load.as_millis() as u64));
        let _ = drive(
            self.target(),
            ledger,
            rng,
            depth,
            Instant::now() + load,
            figures,
        )?;
        killer.join().expect("killer");
        self.kill();
        self.serve(&[])
    }

    fn status(&self) -> Result<serde_json::Value> {
        Ok(serde_json::from_str(&http_request(
            self.http, "GET", "/status",
        )?)?)
    }

    fn states(&self) -> Result<Vec<String>> {
        let s = self.status()?;
        Ok(s["arrays"][0]["members"]["members"]
            .as_array()
            .context("a member array's status")?
            .iter()
            .map(|m| m["state"].as_str().unwrap_or("?").to_string())
            .collect())
    }

    fn whole(&self) -> Result<bool> {
        Ok(self.states()?.iter().all(|s| s == "in-sync"))
    }

    fn replace(&self, member: usize, path: &Path) -> Result<()> {
        http_request(
            self.http,
            "POST",
            &format!(
                "/replace-member?array=0&member={member}&path={}",
                cordillera_runtime::pool_server::percent_encode(&path.display().to_string())
            ),
        )?;
        Ok(())
    }

    fn wait_whole(&self, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        while !self.whole()? {
            if Instant::now() > deadline {
                bail!("not rebuilt after {limit:?}: {:?}", self.states()?);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

fn alive(
    c: &PoolCluster,
    ledger: &mut Ledger,
    rng: &mut Rng,
    depth: usize,
    span: Duration,
    figures: &mut Figures,
    when: &str,
) -> Result<()> {
    if !drive(
        c.target(),
        ledger,
        rng,
        depth,
        Instant::now() + span,
        figures,
    )? {
        bail!(
            "the pool died {when} (see {})",
            c.dir.join("pool.stderr").display()
        );
    }
    Ok(())
}

pub(super) fn campaign_pool(
    dir: &Path,
    args: &ChaosArgs,
    rng: &mut Rng,
    deadline: Instant,
    figures: &mut Figures,
    p: &mut PoolFigures,
) -> Result<()> {
    let mut c = PoolCluster::start(dir, args.blocks, rng)?;
    p.clusters += 1;
    let mut ledger = Ledger::new(args.blocks);
    let events = 4 + rng.below(5);
    for _ in 0..events {
        if Instant::now() >= deadline {
            break;
        }
        let load = rng.millis(300, 2500);
        let whole = c.whole()?;
        let roll = rng.below(100);
        match roll {
            36..=55 if whole && c.faulty.is_some() => {
                // The faulty member returns EIO mid-load: failed, nothing reaches the client.
                let (i, m) = c.faulty.as_ref().expect("faulty");
                let i = *i;
                m.errors(true).context("turning EIO on")?;
                p.member_eio += 1;
                alive(
                    &c,
                    &mut ledger,
                    rng,
                    args.depth,
                    load,
                    figures,
                    "with a member returning EIO",
                )?;
                verify(c.target(), &mut ledger, figures).context("with a member returning EIO")?;
                // The whole region was read: the member was touched, and failed.
                if c.states()?[i] != "failed" {
                    bail!("member {i} returned EIO, the pool says {:?}", c.states()?);
                }
                // Healed and put back as a new disk; rebuilt under load, SIGKILL mid-way half
                // the time.
                let (_, m) = c.faulty.as_ref().expect("faulty");
                m.errors(false).context("turning EIO off")?;
                let path = m.path();
                if c.states()?[i] == "failed" {
                    c.replace(i, &path)?;
                    if rng.chance(0.5) {
                        c.kill_mid_load(&mut ledger, rng, args.depth, load, 50, figures)?;
                        p.kills_mid_rebuild += 1;
                    } else {
                        alive(
                            &c,
                            &mut ledger,
                            rng,
                            args.depth,
                            load,
                            figures,
                            "while rebuilding",
                        )?;
                    }
                    c.wait_whole(Duration::from_secs(120))?;
                    p.rebuilds += 1;
                }
                verify(c.target(), &mut ledger, figures).context("after the rebuild")?;
            }
            56..=70 if c.faulty.is_some() => {
                // The device stalls (its nbdkit stopped) mid-load, then goes on.
                let pid = c.faulty.as_ref().expect("faulty").1.nbdkit_pid();
                let stall = stall_later(pid, rng.millis(50, 300), rng.millis(300, 4000));
                alive(
                    &c,
                    &mut ledger,
                    rng,
                    args.depth,
                    load,
                    figures,
                    "with a device stalled",
                )?;
                stall.join().expect("stall");
                p.device_stalls += 1;
                verify(c.target(), &mut ledger, figures).context("after a device stall")?;
            }
            71..=85 if whole => {
                // A member file lost while the pool is stopped: served degraded, then replaced.
                // (Lost together with an unclean stop it is refused: a double fault.)
                c.stop();
                let candidates: Vec<usize> = (0..MEMBERS)
                    .filter(|i| c.faulty.as_ref().is_none_or(|(f, _)| f != i))
                    .collect();
                let i = candidates[rng.below(candidates.len() as u64) as usize];
                std::fs::remove_file(&c.members[i])?;
                p.members_lost += 1;
                c.serve(&[])?;
                if c.states()?[i] != "failed" {
                    bail!("member {i} lost, the pool says {:?}", c.states()?);
                }
                verify(c.target(), &mut ledger, figures).context("with a member lost")?;
                alive(&c, &mut ledger, rng, args.depth, load, figures, "degraded")?;
                let fresh = c.dir.join(format!("m{i}-{}", rng.below(1 << 30)));
                c.replace(i, &fresh)?;
                c.members[i] = fresh;
                alive(
                    &c,
                    &mut ledger,
                    rng,
                    args.depth,
                    load,
                    figures,
                    "while rebuilding",
                )?;
                c.wait_whole(Duration::from_secs(120))?;
                p.rebuilds += 1;
                verify(c.target(), &mut ledger, figures).context("after the rebuild")?;
            }
            86..=99 => {
                // An unclean stop mid-write: every row consistent after the restart.
                c.kill_mid_load(&mut ledger, rng, args.depth, load, 100, figures)?;
                p.kills += 1;
                let r: serde_json::Value =
                    serde_json::from_str(&http_request(c.http, "POST", "/scrub?array=0")?)?;
                if r["mismatched"].as_array().is_none_or(|m| !m.is_empty()) {
                    bail!("after an unclean stop, the scrub found {r}");
                }
                p.scrubs_after_unclean_stop += 1;
                verify(c.target(), &mut ledger, figures).context("after an unclean stop")?;
            }
            _ => {
                // SIGKILL of the pool mid-load.
                c.kill_mid_load(&mut ledger, rng, args.depth, load, 100, figures)?;
                p.kills += 1;
                verify(c.target(), &mut ledger, figures).context("after a pool SIGKILL")?;
            }
        }
    }
    c.stop();
    Ok(())
}
