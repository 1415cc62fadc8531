//! libCacheSim, the cache simulator storage researchers already use, as `bench cache`'s peer:
//! the same block accesses written as its `oracleGeneral` trace (one 4 KiB object per block a
//! request touches, as our cache sees them), its LRU, FIFO, CLOCK, SIEVE and S3-FIFO run through its Python
//! bindings (PyPI `libcachesim`; the C simulator underneath does the work), timed around its
//! `process_trace` alone — reading the file included, as it streams — and their hit counts
//! against ours.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use cordillera_trace::oracle::OracleWriter;
use cordillera_trace::{Record, VolumeId};
use cordillera_types::Op;
use cordillera_warmup::sim::{block_range, BLOCK_BYTES};

/// The policies both simulators have, by our names, in the order of our
/// `cordillera_warmup::cache::Policy::ALL` (libCacheSim's classes: `LRU`, `FIFO`, `Clock` with
/// its default one-bit counter — CLOCK's second chance — `Sieve` and `S3FIFO` with its defaults).
pub const POLICIES: [&str; 5] = ["lru", "fifo", "clock", "sieve", "s3fifo"];

/// Runs each policy from an empty cache of `size` bytes over the file; prints one JSON object:
/// policy → seconds, requests, hits (from the miss ratio libCacheSim returns, a double).
const PEER: &str = r#"
import json, sys, time
import libcachesim as lcs
path, size = sys.argv[1], int(sys.argv[2])
classes = {"lru": lcs.LRU, "fifo": lcs.FIFO, "clock": lcs.Clock, "sieve": lcs.Sieve,
           "s3fifo": lcs.S3FIFO}
out = {}
for name in sys.argv[3].split(","):
    reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)
    n = reader.get_num_of_req()
    cache = classes[name](size)
    started = time.perf_counter()
    miss = cache.process_trace(reader)[0]
    seconds = time.perf_counter() - started
    out[name] = {"seconds": seconds, "requests": n, "hits": round((1.0 - miss) * n)}
print(json.dumps(out))
"#;

/// One policy's run in libCacheSim.
#[derive(Clone, Debug)]
pub struct PeerRun {
    pub seconds: f64,
    /// Block accesses (libCacheSim's requests).
    pub requests: u64,
    pub hits: u64,
}

/// A Python that imports `libcachesim`: `CORDILLERA_LIBCACHESIM_PYTHON`, the one
/// `scripts/test.sh` installs (`target/peers/venv`, from the working directory or beside the
/// binary's target directory), or `python3`. `None` when none does.
pub fn python() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("CORDILLERA_LIBCACHESIM_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.push(PathBuf::from("target/peers/venv/bin/python"));
    if let Some(target) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent()?.parent().map(Path::to_path_buf))
    {
        candidates.push(target.join("peers/venv/bin/python"));
    }
    candidates.push(PathBuf::from("python3"));
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import libcachesim"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Writes every block access of `records` as one 4 KiB `oracleGeneral` request; returns how
/// many.
pub fn write_blocks(records: &[Record], path: &Path) -> Result<u64> {
    let mut w = OracleWriter::create(path)?;
    for r in records {
        for block in block_range(r.offset_bytes, r.length_bytes) {
            w.write(&Record {
                time_ns: r.time_ns.max(0),
                volume: VolumeId(0),
                op: Op::Read,
                offset_bytes: block * BLOCK_BYTES,
                length_bytes: BLOCK_BYTES,
                response_ns: None,
            })?;
        }
    }
    Ok(w.finish()?)
}

/// One round of every policy in libCacheSim over `path`, a cache of `cache_bytes`.
pub fn run(python: &Path, path: &Path, cache_bytes: u64) -> Result<Vec<(String, PeerRun)>> {
    let out = Command::new(python)
        .args(["-c", PEER])
        .arg(path)
        .arg(cache_bytes.to_string())
        .arg(POLICIES.join(","))
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    if !out.status.success() {
        bail!(
            "libCacheSim ({}) failed: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("libCacheSim's output is not JSON")?;
    POLICIES
        .iter()
        .map(|p| {
            let r = &json[p];
            let field = |k: &str| {
                r[k].as_f64()
                    .with_context(|| format!("libCacheSim's {p}: no {k} in {r}"))
            };
            Ok((
                p.to_string(),
                PeerRun {
                    seconds: field("seconds")?,
                    requests: field("requests")? as u64,
                    hits: field("hits")? as u64,
                },
            ))
        })
        .collect()
}

/// libCacheSim's side of `bench cache`: the trace written once, then rounds run between ours,
/// the best of each policy kept; its hit counts checked against ours at the end.
pub struct Rounds {
    python: PathBuf,
    path: PathBuf,
    accesses: u64,
    cache_bytes: u64,
    best: Vec<(String, PeerRun)>,
}

impl Rounds {
    /// `None` when no Python here imports libcachesim.
    pub fn start(records: &[Record], cache_bytes: u64) -> Result<Option<Rounds>> {
        let Some(python) = python() else {
            return Ok(None);
        };
        let path = std::env::temp_dir().join(format!(
            "cordillera-bench-cache-{}.oracleGeneral",
            std::process::id()
        ));
        let accesses = match write_blocks(records, &path) {
            Ok(n) => n,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        Ok(Some(Rounds {
            python,
            path,
            accesses,
            cache_bytes,
            best: Vec::new(),
        }))
    }

    /// One round of every policy.
    pub fn round(&mut self) -> Result<()> {
        for (name, r) in run(&self.python, &self.path, self.cache_bytes)? {
            match self.best.iter_mut().find(|(n, _)| *n == name) {
                Some((_, b)) if b.seconds <= r.seconds => {}
                Some((_, b)) => *b = r,
                None => self.best.push((name, r)),
            }
        }
        Ok(())
    }

    /// The Python and each policy's best run, in [`POLICIES`]' order; an error when a hit
    /// count differs from ours (`ours`: each policy's counts, in the same order).
    #[allow(clippy::type_complexity)]
    pub fn finish(
        mut self,
        ours: &[(
            cordillera_warmup::cache::Policy,
            f64,
            cordillera_warmup::sim::Counts,
        )],
    ) -> Result<(PathBuf, Vec<(String, PeerRun)>)> {
        let best = std::mem::take(&mut self.best);
        anyhow::ensure!(
            best.len() == ours.len(),
            "libCacheSim ran {} policies, ours {}",
            best.len(),
            ours.len()
        );
        for ((name, r), (policy, _, c)) in best.iter().zip(ours) {
            anyhow::ensure!(*name == policy.to_string(), "{name} beside our {policy}");
            let hits = c.read_block_hits + c.write_block_hits;
            anyhow::ensure!(
                r.requests == self.accesses && r.hits == hits,
                "{name}: libCacheSim counted {} hits in {} block accesses, ours {hits} in {}",
                r.hits,
                r.requests,
                self.accesses
            );
        }
        Ok((self.python.clone(), best))
    }
}

impl Drop for Rounds {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
