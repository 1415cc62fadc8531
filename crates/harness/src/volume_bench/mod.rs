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
//! Each write case starts from fresh files, so that nothing off-loaded by one is reclaimed
//! during another; the read cases share one filled file (the volume's label is wiped before
//! each, so each formats afresh with a new store). Before every fio run the page cache's dirty
//! data is written back (`sync`), so that no run pays for the previous one's writeback, and in
//! the comparisons with nbdkit the server that goes first alternates from round to round.
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
use figures::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cpus::{on_cpu, SERVER_CPU};
use crate::fio_nbd::{fio, fio_run};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
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

/// Runs `program args…` and waits for each line starting with one of `wanted` on its standard
/// error; returns the rest of each.
pub(crate) fn spawn_until(
    program: &Path,
    args: &[String],
    wanted: &[&str],
) -> Result<(Proc, Vec<String>)> {
    Proc::spawn_until(program, args, wanted).map_err(|e| anyhow!(e))
}

/// `r`, and on failure what the servers behind the run printed on standard error: an fio error
/// (an EIO, say) says what the client saw, their logs why.
pub(crate) fn explained<T>(r: Result<T>, servers: &[Proc]) -> Result<T> {
    r.map_err(|e| {
        let mut said = format!("{e:#}");
        for p in servers {
            said.push_str(&format!(
                "\n--- server {} said on standard error:\n{}",
                p.id(),
                p.log()
            ));
        }
        anyhow!(said)
    })
}

pub(crate) fn free_port() -> Result<u16> {
    Ok(cordillera_procs::process::free_addr()?.port())
}

pub(crate) struct Setup<'a> {
    pub me: PathBuf,
    pub dir: &'a Path,
    pub region: u64,
}

impl Setup<'_> {
    /// Removes the files `names` (each case's base and store once it is measured: the
    /// bench's peak disk use is one case's files beside the shared filled base).
    pub(crate) fn discard(&self, names: &[&str]) {
        for name in names {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
    }

    pub(crate) fn base(&self, name: &str) -> Result<PathBuf> {
        let path = self.dir.join(name);
        let _ = std::fs::remove_file(&path);
        std::fs::File::create(&path)?.set_len(self.region + (64 << 10))?;
        Ok(path)
    }

    /// The file the read cases share: its region filled with data on first use (written
    /// through the page cache, as a volume's data would be after use), its last 8 KiB (a
    /// volume's label and store set) zeroed on every use so that a volume formats it afresh.
    fn filled(&self, name: &str) -> Result<PathBuf> {
        use std::io::{Seek, SeekFrom, Write};
        let path = self.dir.join(name);
        let size = self.region + (64 << 10);
        let fresh = std::fs::metadata(&path).map_or(true, |m| m.len() != size);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(fresh)
            .write(true)
            .open(&path)?;
        if fresh {
            eprintln!(
                "volume bench: filling {} bytes of {} for the read cases",
                self.region,
                path.display()
            );
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut chunk = vec![0u8; 1 << 20];
            let mut done = 0;
            while done < self.region {
                for word in chunk.chunks_exact_mut(8) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    word.copy_from_slice(&x.to_le_bytes());
                }
                let n = (self.region - done).min(chunk.len() as u64) as usize;
                f.write_all(&chunk[..n])?;
                done += n as u64;
            }
            f.set_len(size)?;
        }
        f.seek(SeekFrom::Start(size - 8192))?;
        f.write_all(&[0u8; 8192])?;
        Ok(path)
    }

    fn store(&self, name: &str, emulate: bool) -> Result<(Proc, String)> {
        let path = self.dir.join(name);
        let _ = std::fs::remove_file(&path);
        let mut args: Vec<String> = [
            "store",
            "serve",
            "--size",
            "2g",
            "--sparse",
            "--io",
            "buffered",
            "--listen",
            "127.0.0.1:0",
            "--path",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(path.to_string_lossy().into());
        if emulate {
            args.extend(["--emulate".into(), "cheetah-15k".into()]);
        }
        let (p, found) = on_cpu(SERVER_CPU, || {
            spawn_until(&self.me, &args, &["cordillera store: listening on "])
        })?;
        Ok((p, found[0].clone()))
    }

    /// A freshly formatted volume with one store; returns (processes, NBD URI, metrics addr).
    pub(crate) fn volume(
        &self,
        name: &str,
        extra: &[&str],
        emulate: bool,
    ) -> Result<(Vec<Proc>, String, String)> {
        let base = self.base(&format!("{name}.base"))?;
        self.volume_on(name, &base, extra, emulate)
    }

    /// A volume formatted on `base` (which must have no label) with a fresh store `NAME.store`.
    pub(crate) fn volume_on(
        &self,
        name: &str,
        base: &Path,
        extra: &[&str],
        emulate: bool,
    ) -> Result<(Vec<Proc>, String, String)> {
        let (store, store_addr) = self.store(&format!("{name}.store"), emulate)?;
        let (v, uri, metrics) = self.volume_server(base, &store_addr, extra, emulate, true)?;
        Ok((vec![v, store], uri, metrics))
    }

    /// A volume server on `base` with the store at `store_addr`: formatting `base` first, or
    /// (`format` false) recovering the volume it holds; returns (process, NBD URI, metrics
    /// address).
    fn volume_server(
        &self,
        base: &Path,
        store_addr: &str,
        extra: &[&str],
        emulate: bool,
        format: bool,
    ) -> Result<(Proc, String, String)> {
        let mut args: Vec<String> = ["volume", "serve"].iter().map(|s| s.to_string()).collect();
        if format {
            args.push("--format".into());
        }
        args.extend(
            [
                "--nbd",
                "127.0.0.1:0",
                "--metrics",
                "127.0.0.1:0",
                "--store",
                store_addr,
                "--base",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        args.push(base.to_string_lossy().into());
        args.extend(extra.iter().map(|s| s.to_string()));
        if emulate {
            args.extend(["--emulate".into(), "cheetah-15k".into()]);
        }
        let (v, found) = on_cpu(SERVER_CPU, || {
            spawn_until(
                &self.me,
                &args,
                &[
                    "cordillera volume: NBD export at ",
                    "cordillera volume: metrics at http://",
                ],
            )
        })?;
        let metrics = found[1].trim_end_matches("/metrics").to_string();
        Ok((v, found[0].clone(), metrics))
    }

    fn nbdkit(&self, name: &str) -> Result<(Proc, String)> {
        let base = self.base(name)?;
        self.nbdkit_on(&base)
    }

    /// `nbdkit file` serving `base` as it is.
    fn nbdkit_on(&self, base: &Path) -> Result<(Proc, String)> {
        nbdkit_serving(base, false)
    }

    /// `nbdkit file` serving `base` with every write durable before its reply (the `fua`
    /// filter's `fuamode=force`: each write carries FUA, which the file plugin makes durable
    /// with a flush), as an off-loaded write is: the store acknowledges an append only once
    /// its log is durable.
    fn nbdkit_durable_on(&self, base: &Path) -> Result<(Proc, String)> {
        nbdkit_serving(base, true)
    }
}

/// glibc's allocator for nbdkit: buffers up to this size come from its heap, not each mapped
/// and unmapped on its own. Left to itself, glibc maps every buffer over 128 KiB until its
/// threshold adapts, and a fresh `nbdkit file` serves its first 5 s of 1 MiB reads at about
/// two thirds of its rate 10 s later (docs/BENCHMARKS.md); with it, at that rate from the
/// start. Our servers allocate with mimalloc, which has no such phase.
pub(crate) const NBDKIT_MALLOC: &str = "glibc.malloc.mmap_threshold=4194304";

/// `nbdkit file` on `base`, with the `fua` filter forcing FUA on every write if `durable`.
fn nbdkit_serving(base: &Path, durable: bool) -> Result<(Proc, String)> {
    let port = free_port()?;
    let mut command = Command::new("nbdkit");
    command.env("GLIBC_TUNABLES", NBDKIT_MALLOC);
    command.args([
        "--foreground",
        "--exit-with-parent",
        "--port",
        &port.to_string(),
    ]);
    if durable {
        command.arg("--filter=fua");
    }
    command.arg("file").arg(base);
    if durable {
        command.arg("fuamode=force");
    }
    let child = on_cpu(SERVER_CPU, || command.stderr(Stdio::null()).spawn())
        .context("cannot run nbdkit (install it: apt-get install nbdkit)")?;
    let proc = Proc::adopt(child);
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok((proc, format!("nbd://127.0.0.1:{port}")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("nbdkit did not start listening on {port}")
}

/// The benchmark's directory: `given` (created if missing), else a fresh one under `parent`,
/// removed when the returned guard drops.
pub(crate) fn work_dir(
    given: &Option<PathBuf>,
    parent: &Path,
    prefix: &str,
) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    if let Some(d) = given {
        std::fs::create_dir_all(d)?;
        return Ok((d.clone(), None));
    }
    let scratch = tempfile::Builder::new().prefix(prefix).tempdir_in(parent)?;
    Ok((scratch.path().to_path_buf(), Some(scratch)))
}

/// Bytes an unprivileged writer may still use on the file system holding `path`.
pub(crate) fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a zeroed statvfs for the kernel to fill.
    let ok = unsafe { libc::statvfs(c_path.as_ptr(), &mut stats) } == 0;
    ok.then(|| stats.f_bavail as u64 * stats.f_frsize as u64)
}

pub(crate) fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

/// The bytes whose latest version is off-loaded, from the volume's status.
pub(crate) fn offloaded_bytes(metrics: &str) -> Result<u64> {
    let addr = metrics.parse().context("metrics address")?;
    let v: serde_json::Value =
        serde_json::from_str(&cordillera_runtime::http::http_get(addr, "/status")?)?;
    v["offloaded_bytes"]
        .as_u64()
        .ok_or_else(|| anyhow!("no offloaded_bytes in the volume's status"))
}

pub(crate) fn offloaded_fraction(metrics: &str) -> Result<f64> {
    let addr = metrics.parse().context("metrics address")?;
    let v: serde_json::Value =
        serde_json::from_str(&cordillera_runtime::http::http_get(addr, "/status")?)?;
    let off = v["offloaded_writes"].as_f64().unwrap_or(0.0);
    let base = v["base_writes"].as_f64().unwrap_or(0.0);
    Ok(if off + base > 0.0 {
        off / (off + base)
    } else {
        0.0
    })
}

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
        self.measure_with(uri, seconds, region, &[])
    }

    /// The load with `more` of fio's options after its own.
    fn measure_with(&self, uri: &str, seconds: u64, region: u64, more: &[&str]) -> Result<f64> {
        let extra: Vec<&str> = self.extra.iter().chain(more).copied().collect();
        let f = fio(uri, self.rw, self.bs, self.depth, seconds, region, &extra)?;
        Ok(if self.bandwidth {
            f.bytes_per_s / 1e6
        } else {
            f.iops
        })
    }
}

/// Per read load: the volume's, nbdkit's and the partly off-loaded volume's figure per round.
#[derive(Default, Clone)]
struct ReadRounds {
    volume: Vec<f64>,
    nbdkit: Vec<f64>,
    partly: Vec<f64>,
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
        eprintln!(
            "volume bench: round {}/{rounds}: 4 KiB random writes, depth 32",
            round + 1
        );
        let nbdkit_first = nbdkit_goes_first(round);
        for nbdkit in [nbdkit_first, !nbdkit_first] {
            if nbdkit {
                let (_k, uri) = setup.nbdkit("nbdkit.base")?;
                k4k.push(fio(&uri, "randwrite", "4k", 32, s, region, &[])?.iops);
            } else {
                let (v, uri, _) = setup.volume("plain", &[], false)?;
                v4k.push(explained(fio(&uri, "randwrite", "4k", 32, s, region, &[]), &v)?.iops);
            }
            setup.discard(&["nbdkit.base", "plain.base", "plain.store"]);
        }
        eprintln!(
            "volume bench: round {}/{rounds}: 1 MiB sequential writes, depth 8",
            round + 1
        );
        for nbdkit in [nbdkit_first, !nbdkit_first] {
            if nbdkit {
                let (_k, uri) = setup.nbdkit("nbdkit.base")?;
                k1m.push(fio(&uri, "write", "1m", 8, s, region, &[])?.bytes_per_s / 1e6);
            } else {
                let (v, uri, _) = setup.volume("plain", &[], false)?;
                v1m.push(
                    explained(fio(&uri, "write", "1m", 8, s, region, &[]), &v)?.bytes_per_s / 1e6,
                );
            }
            setup.discard(&["nbdkit.base", "plain.base", "plain.store"]);
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
            let (_k, uri) = setup.nbdkit_on(&filled)?;
            for (load, r) in READ_LOADS.iter().zip(reads.iter_mut()) {
                eprintln!(
                    "volume bench: round {}/{rounds}: {} (nbdkit)",
                    round + 1,
                    load.label
                );
                r.nbdkit.push(load.measure(&uri, s, region)?);
            }
        } else {
            let (v, uri, _) = setup.volume_on("reads", &filled, &[], false)?;
            for (load, r) in READ_LOADS.iter().zip(reads.iter_mut()) {
                eprintln!(
                    "volume bench: round {}/{rounds}: {} (volume)",
                    round + 1,
                    load.label
                );
                r.volume.push(explained(load.measure(&uri, s, region), &v)?);
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
            r.partly.push(explained(load.measure(&uri, s, region), &v)?);
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
        partly.mix_baseline_policy.push(explained(
            mix.measure_with(&uri, s, region, &[FRESH_OFFSETS]),
            &v,
        )?);
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
