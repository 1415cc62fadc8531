//! `cordillera volume bench`: the off-loading volume server against `nbdkit file` and against
//! itself without off-load, driven by fio's NBD engine, every figure measured in the same run:
//!
//! 1. no emulation, off-load idle (peak policy, one store, nothing off-loaded at depth 32 with
//!    T_base = 32), each against `nbdkit file` on an equal file in the same round:
//!    - 4 KiB random writes at depth 32 (IOPS) and 1 MiB sequential writes at depth 8 (MB/s),
//!      on fresh sparse files;
//!    - 4 KiB random reads at depth 32, a 4 KiB random 70/30 read/write mix at depth 32 (IOPS)
//!      and 1 MiB sequential reads at depth 8 (MB/s), on a file whose region is filled with
//!      data first (reads of a sparse file would measure holes);
//! 2. the same three read loads on a volume whose data sits partly on a store: the filled file,
//!    then random 4 KiB writes over a quarter of the region's bytes off-loaded with
//!    `--policy always` (never reclaimed), so that reads are cut between the base volume and
//!    the store; against the round's nbdkit figures on the same file and loads. The mix runs
//!    last: its writes are off-loaded too, so the two read-only loads see exactly the fraction
//!    printed. The mix runs again on the same volume restarted with `--policy baseline`, as
//!    out of a peak: writes over blocks whose latest data is on the store are off-loaded all
//!    the same (versions decide which copy is the latest), the others go to the base volume;
//!    the share of the region on the store when it starts and the share of its writes
//!    off-loaded are printed (the two agree: fio's random writes, on a random sequence of
//!    their own, fall on blocks on the store as often as the region holds them). Every write
//!    of the mix under `--policy always` is off-loaded, and the store acknowledges it only
//!    once its log is durable, where `nbdkit file` answers a write once it is in the page
//!    cache: the mix is also measured, right after, on nbdkit with every write durable before
//!    its reply (the `fua` filter, `fuamode=force`), and the partly off-loaded mix is given
//!    against both;
//! 3. base volume and one idle store each emulating `cheetah-15k` (`--emulate`): 64 KiB random
//!    writes at depth 32, throughput with peak off-load (T_base as `--t-base`) ÷ the same volume
//!    with `--policy baseline` (Everest §4.3 reports about 3× for OLTP with one idle store).
//!
//! For each read load the CPU each server spent per request is measured too (`/proc/PID/stat`
//! before and after fio's run, user and system time of all its threads, ÷ the requests fio
//! counted; the partly off-loaded volume and its store apart), with fio's own CPU: with the
//! servers on one CPU, nbdkit's CPU per request ÷ ours bounds the throughput ratio.
//!
//! Each write case starts from fresh files, so that nothing off-loaded by one is reclaimed
//! during another; the read cases share one filled file (the volume's label is wiped before
//! each, so each formats afresh with a new store). Before every fio run the page cache's dirty
//! data is written back (`sync`), so that no run pays for the previous one's writeback, and in
//! the comparisons with nbdkit the server that goes first alternates from round to round. The
//! write loads run each server twice, first, second, second, first, after an untimed run of
//! the load, and take the mean of its two runs: measured once each, the first was slower by up
//! to half ([`measure_write`]).
//! Figures are medians of `--repeat` rounds; each ratio is the median of the rounds' ratios
//! (the two runs of a round are measured back to back, so a slow spell of a shared machine
//! weighs on both).
//!
//! On a machine with two CPUs or more the servers (nbdkit, or the volume server and its store)
//! run on CPU 1 and fio on CPU 0 (`crate::cpus`; `--no-pin` leaves them to the scheduler, which
//! now and then stacks fio and a server on one CPU and swings a run by up to 2×). nbdkit runs
//! with glibc's mmap threshold fixed at 4 MiB ([`NBDKIT_MALLOC`]): its own allocator's
//! warm-up would otherwise count against it in the first run of every load.

mod figures;
mod servers;
use figures::*;
pub(crate) use servers::*;
use std::path::{Path, PathBuf};

use crate::fio_nbd::{fio, fio_run};

use anyhow::{bail, Result};
use clap::Args;
use serde::Serialize;

#[derive(Args)]
pub struct VolumeBenchArgs {
    /// Directory for the base volumes and stores (created and removed there).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seconds of each fio run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Rounds of every measurement; the figures are medians.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Bytes of the region written (of the base volume).
    #[arg(long, default_value = "1g")]
    region: String,
    /// T_base of the emulated case.
    #[arg(long, default_value_t = 4)]
    t_base: u64,
    #[arg(long)]
    json: bool,
    /// Leave fio and the servers where the scheduler puts them. By default, on a machine with
    /// two CPUs or more, the servers (the volume server and its store, or nbdkit) run on CPU 1
    /// and fio on CPU 0, as on two machines: on two CPUs the scheduler otherwise stacks fio
    /// and a server now and then, and the same run swings by up to 2× from one measurement to
    /// the next.
    #[arg(long)]
    no_pin: bool,
}

pub(crate) use cordillera_procs::process::Proc;

/// Whether nbdkit runs before the volume in `round` (they alternate, so that neither always
/// finds the machine as the other left it).
fn nbdkit_goes_first(round: usize) -> bool {
    round.is_multiple_of(2)
}

fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}

pub(crate) use crate::median;

/// One read load of the read cases: fio's `--rw`, block size, depth, extra options, and
/// whether the figure is MB/s (else IOPS).
struct ReadLoad {
    label: &'static str,
    rw: &'static str,
    bs: &'static str,
    depth: u32,
    extra: &'static [&'static str],
    bandwidth: bool,
}

const READ_LOADS: [ReadLoad; 3] = [
    ReadLoad {
        label: "4 KiB random reads, depth 32",
        rw: "randread",
        bs: "4k",
        depth: 32,
        extra: &[],
        bandwidth: false,
    },
    ReadLoad {
        label: "1 MiB sequential reads, depth 8",
        rw: "read",
        bs: "1m",
        depth: 8,
        extra: &[],
        bandwidth: true,
    },
    ReadLoad {
        label: "4 KiB random 70/30 read/write, depth 32",
        rw: "randrw",
        bs: "4k",
        depth: 32,
        extra: &["--rwmixread=70"],
        bandwidth: false,
    },
];

/// fio's offsets for the 70/30 mix after the restart: another sequence than the mix before
/// it. fio repeats its random sequence from run to run (`randrepeat`), so with the same seed
/// that mix would write, first, exactly the blocks the mix before the restart off-loaded
/// (89–100 % of its writes off-loaded with 46–47 % of the region on the store; with a seed of
/// its own, 49–51 % with 48–50 %).
const FRESH_OFFSETS: &str = "--randseed=4242";

impl ReadLoad {
    fn measure(&self, uri: &str, seconds: u64, region: u64) -> Result<f64> {
        Ok(self.measure_with(uri, seconds, region, &[], &[])?.figure)
    }

    /// The load with `more` of fio's options after its own, and the CPU it cost each of the
    /// `servers` and fio.
    fn measure_with(
        &self,
        uri: &str,
        seconds: u64,
        region: u64,
        more: &[&str],
        servers: &[&Proc],
    ) -> Result<Run> {
        let extra: Vec<&str> = self.extra.iter().chain(more).copied().collect();
        let spent = || -> Vec<Option<f64>> {
            servers
                .iter()
                .map(|p| crate::cpus::process_cpu_seconds(p.id()))
                .collect()
        };
        let before = spent();
        let f = fio(uri, self.rw, self.bs, self.depth, seconds, region, &extra)?;
        let after = spent();
        // A server's share of a CPU over fio's run (its ramp included, at the same load),
        // over the requests per second fio measured.
        let server_us = before
            .iter()
            .zip(&after)
            .map(|(b, a)| match (b, a) {
                (Some(b), Some(a)) if f.iops > 0.0 => (a - b) / f.wall_s / f.iops * 1e6,
                _ => f64::NAN,
            })
            .collect();
        Ok(Run {
            figure: if self.bandwidth {
                f.bytes_per_s / 1e6
            } else {
                f.iops
            },
            server_us,
            client_cpu: f.client_cpu,
        })
    }
}

/// A read load's run: its figure (IOPS, or MB/s), the CPU each server spent per request (µs;
/// user and system, all threads), and fio's CPU as a share of one CPU.
struct Run {
    figure: f64,
    server_us: Vec<f64>,
    client_cpu: f64,
}

/// Per read load: the volume's, nbdkit's and the partly off-loaded volume's figure per round.
#[derive(Default, Clone)]
struct ReadRounds {
    volume: Vec<f64>,
    nbdkit: Vec<f64>,
    partly: Vec<f64>,
    cpu: figures::CpuRounds,
}

/// The partly off-loaded volume's figures besides its read loads, per round.
#[derive(Default)]
struct Partly {
    /// Bytes of the region on the store when the read loads start ÷ region.
    fraction: Vec<f64>,
    /// The 70/30 mix with the volume restarted under `--policy baseline`.
    mix_baseline_policy: Vec<f64>,
    /// Bytes of the region on the store when that mix starts ÷ region (the mix under
    /// `--policy always` before the restart off-loads more of it: how much depends on its
    /// rate, up to all of a small region).
    mix_fraction_at_start: Vec<f64>,
    /// The fraction of that mix's writes off-loaded all the same.
    mix_offloaded_writes: Vec<f64>,
    /// The 70/30 mix on `nbdkit file` with every write durable before its reply (as every
    /// write of the mix under `--policy always` is), right after the partly off-loaded volume.
    mix_nbdkit_durable: Vec<f64>,
}

/// Refuses to start without room in `dir` for what the bench writes there at most: the
/// shared filled base, one case's base and its store's written part, each at most the region,
/// and the store's log overhead. A base write that finds the file system full stops the volume
/// server (its in-flight requests are answered EIO): that would be reported as the volume's
/// failure.
fn check_room(dir: &Path, region: u64) -> Result<()> {
    let need = 3 * region + (256 << 20);
    if let Some(free) = free_bytes(dir) {
        if free < need {
            bail!(
                "{} has {} MiB free; the volume bench writes up to {} MiB there (a filled base, one case's base and store): free some space or give --dir on a larger file system",
                dir.display(),
                free >> 20,
                need >> 20
            );
        }
    }
    Ok(())
}

pub fn run(a: VolumeBenchArgs) -> Result<()> {
    crate::cpus::allow_pinning(!a.no_pin);
    let region = cordillera_models::presets::parse_size(&a.region).map_err(anyhow::Error::msg)?;
    let (dir, _scratch) = work_dir(&a.dir, &std::env::temp_dir(), "cordillera-volume-bench")?;
    check_room(&dir, region)?;
    let setup = Setup {
        me: crate::this_program()?,
        dir: &dir,
        region,
    };
    let s = a.seconds.max(2);
    let rounds = a.repeat.max(1);
    let mut v4k = Vec::new();
    let mut k4k = Vec::new();
    let mut v1m = Vec::new();
    let mut k1m = Vec::new();
    let mut reads = vec![ReadRounds::default(); READ_LOADS.len()];
    let mut partly = Partly::default();
    let mut e_off = Vec::new();
    let mut e_base = Vec::new();
    let mut fraction = Vec::new();
    for round in 0..rounds {
        let nbdkit_first = nbdkit_goes_first(round);
        for (label, rw, bs, (volume, nbdkit)) in [
            (
                "4 KiB random writes, depth 32",
                "randwrite",
                "4k",
                (&mut v4k, &mut k4k),
            ),
            (
                "1 MiB sequential writes, depth 8",
                "write",
                "1m",
                (&mut v1m, &mut k1m),
            ),
        ] {
            eprintln!("volume bench: round {}/{rounds}: {label}", round + 1);
            let (v, k) = measure_write(&setup, nbdkit_first, (rw, bs), (s, region))?;
            volume.push(v);
            nbdkit.push(k);
        }
        measure_reads(
            &setup,
            (round, rounds, nbdkit_first),
            (s, region),
            &mut reads,
            &mut partly,
        )?;
        setup.discard(&["partly.store"]);
        eprintln!(
            "volume bench: round {}/{rounds}: emulated cheetah-15k, 64 KiB random writes, depth 32",
            round + 1
        );
        {
            let t_base = a.t_base.to_string();
            let (v, uri, metrics) = setup.volume("emulated", &["--t-base", &t_base], true)?;
            e_off.push(explained(fio(&uri, "randwrite", "64k", 32, s, region, &[]), &v)?.iops);
            fraction.push(offloaded_fraction(&metrics)?);
        }
        setup.discard(&["emulated.base", "emulated.store"]);
        {
            let (v, uri, _) = setup.volume("emulated", &["--policy", "baseline"], true)?;
            e_base.push(explained(fio(&uri, "randwrite", "64k", 32, s, region, &[]), &v)?.iops);
        }
        setup.discard(&["emulated.base", "emulated.store"]);
    }
    setup.discard(&["filled.base"]);
    let [rr, sr, rw] = [0, 1, 2].map(|i| reads[i].clone());
    let mut f = Figures {
        rounds_reads: READ_LOADS
            .iter()
            .zip(&reads)
            .map(|(load, r)| figures::LoadRounds {
                load: load.label,
                nbdkit: r.nbdkit.clone(),
                volume: r.volume.clone(),
                partly_offloaded: r.partly.clone(),
                cpu_us_per_request: r.cpu.clone(),
            })
            .collect(),
        rounds_nbdkit_first: (0..rounds).map(nbdkit_goes_first).collect(),
        pinned: crate::cpus::pinned(),
        rounds_partly_offloaded_randrw_70_30_4k_durable_ratio: ratios(
            &rw.partly,
            &partly.mix_nbdkit_durable,
        ),
        randrw_70_30_4k_iops_nbdkit_durable: median(partly.mix_nbdkit_durable.clone()),
        rounds_randrw_70_30_4k_iops_nbdkit_durable: partly.mix_nbdkit_durable.clone(),
        rounds_4k_ratio: ratios(&v4k, &k4k),
        rounds_1m_ratio: ratios(&v1m, &k1m),
        rounds_emulated_ratio: ratios(&e_off, &e_base),
        rounds_randread_4k_ratio: ratios(&rr.volume, &rr.nbdkit),
        rounds_randrw_70_30_4k_ratio: ratios(&rw.volume, &rw.nbdkit),
        rounds_seqread_1m_ratio: ratios(&sr.volume, &sr.nbdkit),
        rounds_partly_offloaded_randread_4k_ratio: ratios(&rr.partly, &rr.nbdkit),
        rounds_partly_offloaded_randrw_70_30_4k_ratio: ratios(&rw.partly, &rw.nbdkit),
        rounds_partly_offloaded_seqread_1m_ratio: ratios(&sr.partly, &sr.nbdkit),
        rounds_partly_offloaded_randrw_70_30_4k_baseline_policy_ratio: ratios(
            &partly.mix_baseline_policy,
            &rw.nbdkit,
        ),
        rounds_randwrite_4k_iops_volume: v4k.clone(),
        rounds_randwrite_4k_iops_nbdkit: k4k.clone(),
        rounds_seqwrite_1m_mb_per_s_volume: v1m.clone(),
        rounds_seqwrite_1m_mb_per_s_nbdkit: k1m.clone(),
        randwrite_4k_iops_volume: median(v4k),
        randwrite_4k_iops_nbdkit: median(k4k),
        seqwrite_1m_mb_per_s_volume: median(v1m),
        seqwrite_1m_mb_per_s_nbdkit: median(k1m),
        randread_4k_iops_volume: median(rr.volume),
        randread_4k_iops_nbdkit: median(rr.nbdkit),
        randrw_70_30_4k_iops_volume: median(rw.volume),
        randrw_70_30_4k_iops_nbdkit: median(rw.nbdkit),
        seqread_1m_mb_per_s_volume: median(sr.volume),
        seqread_1m_mb_per_s_nbdkit: median(sr.nbdkit),
        partly_offloaded_randread_4k_iops: median(rr.partly),
        partly_offloaded_randrw_70_30_4k_iops: median(rw.partly),
        partly_offloaded_seqread_1m_mb_per_s: median(sr.partly),
        partly_offloaded_fraction_of_region: median(partly.fraction),
        partly_offloaded_randrw_70_30_4k_baseline_policy_iops: median(
            partly.mix_baseline_policy.clone(),
        ),
        partly_offloaded_baseline_policy_fraction_of_region: partly.mix_fraction_at_start,
        partly_offloaded_baseline_policy_mix_offloaded_writes: partly.mix_offloaded_writes,
        emulated_randwrite_64k_iops_offload: median(e_off),
        emulated_randwrite_64k_iops_baseline: median(e_base),
        emulated_offloaded_write_fraction: median(fraction),
        ..Figures::default()
    };
    f.take_medians();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
        return Ok(());
    }
    print_figures(&f, s, rounds, region);
    Ok(())
}

/// A write load on nbdkit and on a plain volume, each on a fresh sparse file: an untimed run
/// of the load on nbdkit, then the two servers in the order first, second, second, first
/// (`nbdkit_first` says which is first); each server's figure is the mean of its two runs
/// (IOPS at 4 KiB, MB/s at 1 MiB). Measured once each, the server that went first was the
/// slower by up to half (4 KiB writes: the volume ÷ nbdkit 1.65 and 1.15 with nbdkit first,
/// 0.92 and 0.91 with the volume first; 1 MiB: 1.77 and 2.05 against 0.87 and 1.01). With the
/// order above alone the 4 KiB ratios agreed (1.19–1.25) and the 1 MiB ones did not (1.84 and
/// 1.88 against 1.09 and 1.03): the first 1 MiB write run after the 4 KiB ones is the slow one
/// whichever server makes it (by hand with nbdkit alone, 3,129 and 2,750 MB/s against 4,358
/// and 3,737 for the next), which the untimed run takes.
fn measure_write(
    setup: &Setup,
    nbdkit_first: bool,
    (rw, bs): (&str, &str),
    (s, region): (u64, u64),
) -> Result<(f64, f64)> {
    let depth = if bs == "4k" { 32 } else { 8 };
    let figure = |f: crate::fio_nbd::Fio| {
        if bs == "4k" {
            f.iops
        } else {
            f.bytes_per_s / 1e6
        }
    };
    // An untimed run of the load first, on nbdkit and a file of its own: the first write
    // run after the other cases is the slow one whichever server it is.
    {
        let (_k, uri) = setup.nbdkit("settle.base")?;
        fio(&uri, rw, bs, depth, s, region, &[])?;
    }
    setup.discard(&["settle.base"]);
    let (mut volume, mut nbdkit) = (0.0, 0.0);
    for nbdkit_now in [nbdkit_first, !nbdkit_first, !nbdkit_first, nbdkit_first] {
        if nbdkit_now {
            let (_k, uri) = setup.nbdkit("nbdkit.base")?;
            nbdkit += figure(fio(&uri, rw, bs, depth, s, region, &[])?) / 2.0;
        } else {
            let (v, uri, _) = setup.volume("plain", &[], false)?;
            volume += figure(explained(fio(&uri, rw, bs, depth, s, region, &[]), &v)?) / 2.0;
        }
        setup.discard(&["nbdkit.base", "plain.base", "plain.store"]);
    }
    Ok((volume, nbdkit))
}

/// A round's reads: each read load on nbdkit and on a plain volume over the filled base (in
/// the round's order), then on a volume with a quarter of its region off-loaded to a store
/// (the fraction off-loaded, and the mix after a restart under `--policy baseline`, into
/// `partly`).
fn measure_reads(
    setup: &Setup,
    (round, rounds, nbdkit_first): (usize, usize, bool),
    (s, region): (u64, u64),
    reads: &mut [ReadRounds],
    partly: &mut Partly,
) -> Result<()> {
    for nbdkit in [nbdkit_first, !nbdkit_first] {
        let filled = setup.filled("filled.base")?;
        if nbdkit {
            let (k, uri) = setup.nbdkit_on(&filled)?;
            for (load, r) in READ_LOADS.iter().zip(reads.iter_mut()) {
                eprintln!(
                    "volume bench: round {}/{rounds}: {} (nbdkit)",
                    round + 1,
                    load.label
                );
                let run = load.measure_with(&uri, s, region, &[], &[&k])?;
                r.nbdkit.push(run.figure);
                r.cpu.nbdkit.push(run.server_us[0]);
                r.cpu.nbdkit_fio.push(run.client_cpu);
            }
        } else {
            let (v, uri, _) = setup.volume_on("reads", &filled, &[], false)?;
            for (load, r) in READ_LOADS.iter().zip(reads.iter_mut()) {
                eprintln!(
                    "volume bench: round {}/{rounds}: {} (volume)",
                    round + 1,
                    load.label
                );
                let run = explained(load.measure_with(&uri, s, region, &[], &[&v[0]]), &v)?;
                r.volume.push(run.figure);
                r.cpu.volume.push(run.server_us[0]);
                r.cpu.volume_fio.push(run.client_cpu);
            }
        }
        setup.discard(&["reads.store"]);
    }
    {
        let filled = setup.filled("filled.base")?;
        let (store, store_addr) = setup.store("partly.store", false)?;
        let (volume, uri, metrics) =
            setup.volume_server(&filled, &store_addr, &["--policy", "always"], false, true)?;
        let mut v = vec![volume, store];
        eprintln!(
            "volume bench: round {}/{rounds}: off-loading random 4 KiB writes over a quarter of the region",
            round + 1
        );
        let fill = fio_run(
            &uri,
            &[
                "--rw=randwrite".into(),
                "--bs=4k".into(),
                "--iodepth=32".into(),
                format!("--size={region}"),
                format!("--io_size={}", region / 4 / 4096 * 4096),
            ],
        );
        explained(fill, &v)?;
        partly
            .fraction
            .push(offloaded_bytes(&metrics)? as f64 / region as f64);
        for (load, r) in READ_LOADS.iter().zip(reads.iter_mut()) {
            eprintln!(
                "volume bench: round {}/{rounds}: {} (volume partly on a store)",
                round + 1,
                load.label
            );
            let run = explained(load.measure_with(&uri, s, region, &[], &[&v[0], &v[1]]), &v)?;
            r.partly.push(run.figure);
            r.cpu.partly_volume.push(run.server_us[0]);
            r.cpu.partly_store.push(run.server_us[1]);
            r.cpu.partly_fio.push(run.client_cpu);
        }
        // The mix again as a volume out of its peak runs it (`--policy baseline`: no write
        // off-loaded by choice, nothing reclaimed), restarted on the same base and store and
        // recovering what is off-loaded. A write over a block whose latest data is on the
        // store still goes to the store (versions, not completion order, decide which copy
        // is the latest), so it measures what the policy cannot change.
        drop(v.remove(0));
        let (volume, uri, metrics) = setup.volume_server(
            &filled,
            &store_addr,
            &["--policy", "baseline"],
            false,
            false,
        )?;
        v.insert(0, volume);
        partly
            .mix_fraction_at_start
            .push(offloaded_bytes(&metrics)? as f64 / region as f64);
        let mix = &READ_LOADS[2];
        eprintln!(
            "volume bench: round {}/{rounds}: {} (volume partly on a store, --policy baseline)",
            round + 1,
            mix.label
        );
        partly
            .mix_baseline_policy
            .push(explained(mix.measure_with(&uri, s, region, &[FRESH_OFFSETS], &[]), &v)?.figure);
        partly
            .mix_offloaded_writes
            .push(offloaded_fraction(&metrics)?);
        drop(v);
        let (_k, uri) = setup.nbdkit_durable_on(&filled)?;
        eprintln!(
            "volume bench: round {}/{rounds}: {} (nbdkit, every write durable before its reply)",
            round + 1,
            mix.label
        );
        partly
            .mix_nbdkit_durable
            .push(mix.measure(&uri, s, region)?);
    }
    Ok(())
}
