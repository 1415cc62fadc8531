//! libCacheSim, the cache simulator storage researchers already use, as `bench cache`'s peer:
//! the same block accesses written as its `oracleGeneral` trace (one 4 KiB object per block a
//! request touches, as our cache sees them), its LRU, FIFO, CLOCK, SIEVE, S3-FIFO and ARC run
//! through its Python bindings (PyPI `libcachesim`; the C simulator underneath does the work),
//! timed around its `process_trace` alone — reading the file included, as it streams — and
//! their hit counts against ours. ARC reads a second copy of the trace whose objects are one
//! byte each, from a cache of as many bytes as we have blocks: libCacheSim's ARC moves its
//! target size by bytes where the paper moves it by pages, so only with one-byte objects is it
//! the paper's ARC (and ours).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use cordillera_trace::oracle::OracleWriter;
use cordillera_trace::{Record, VolumeId};
use cordillera_types::Op;
use cordillera_warmup::sim::{block_range, BLOCK_BYTES};

/// The policies both simulators have, by our names, in the order of our
/// `cordillera_warmup::cache::Policy::ALL` (libCacheSim's classes: `LRU`, `FIFO`, `Clock` with
/// its default one-bit counter — CLOCK's second chance — `Sieve`, `S3FIFO` with its defaults and
/// `ARC`), and whether the policy reads the trace of one-byte objects.
pub const POLICIES: [(&str, bool); 6] = [
    ("lru", false),
    ("fifo", false),
    ("clock", false),
    ("sieve", false),
    ("s3fifo", false),
    ("arc", true),
];

/// Runs each policy (the argument: a JSON list of [policy, trace file, cache size in the
/// trace's bytes]) from an empty cache over its file; prints one JSON object: policy →
/// seconds, requests, hits (from the miss ratio libCacheSim returns, a double).
const PEER: &str = r#"
import json, sys, time
import libcachesim as lcs
classes = {"lru": lcs.LRU, "fifo": lcs.FIFO, "clock": lcs.Clock, "sieve": lcs.Sieve,
           "s3fifo": lcs.S3FIFO, "arc": lcs.ARC}
out = {}
for name, path, size in json.loads(sys.argv[1]):
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

/// Writes every block access of `records` as one `oracleGeneral` request of an object of
/// `object_bytes` (4 KiB, or 1 for libCacheSim's ARC); returns how many.
pub fn write_blocks(records: &[Record], path: &Path, object_bytes: u64) -> Result<u64> {
    let mut w = OracleWriter::create(path)?;
    for r in records {
        for block in block_range(r.offset_bytes, r.length_bytes) {
            w.write(&Record {
                time_ns: r.time_ns.max(0),
                volume: VolumeId(0),
                op: Op::Read,
                offset_bytes: block * BLOCK_BYTES,
                length_bytes: object_bytes,
                response_ns: None,
            })?;
        }
    }
    Ok(w.finish()?)
}

/// One round of every policy in libCacheSim, a cache of `cache_blocks`: over `path` (4 KiB
/// objects), or `unit_path` (one-byte objects) for the policies that read it.
pub fn run(
    python: &Path,
    (path, unit_path): (&Path, &Path),
    cache_blocks: u64,
) -> Result<Vec<(String, PeerRun)>> {
    let runs: Vec<serde_json::Value> = POLICIES
        .iter()
        .map(|&(name, unit)| match unit {
            false => serde_json::json!([name, path, cache_blocks * BLOCK_BYTES]),
            true => serde_json::json!([name, unit_path, cache_blocks]),
        })
        .collect();
    let out = Command::new(python)
        .args(["-c", PEER])
        .arg(serde_json::Value::Array(runs).to_string())
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
        .map(|(p, _)| {
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
    /// The trace of 4 KiB objects, and of one-byte ones.
    paths: [PathBuf; 2],
    accesses: u64,
    cache_blocks: u64,
    best: Vec<(String, PeerRun)>,
}

impl Rounds {
    /// `None` when no Python here imports libcachesim.
    pub fn start(records: &[Record], cache_blocks: u64) -> Result<Option<Rounds>> {
        let Some(python) = python() else {
            return Ok(None);
        };
        let path = |kind: &str| {
            std::env::temp_dir().join(format!(
                "cordillera-bench-cache-{}{kind}.oracleGeneral",
                std::process::id()
            ))
        };
        // Removed on drop, whatever happens from here.
        let mut rounds = Rounds {
            python,
            paths: [path(""), path("-unit")],
            accesses: 0,
            cache_blocks,
            best: Vec::new(),
        };
        rounds.accesses = write_blocks(records, &rounds.paths[0], BLOCK_BYTES)?;
        write_blocks(records, &rounds.paths[1], 1)?;
        Ok(Some(rounds))
    }

    /// One round of every policy.
    pub fn round(&mut self) -> Result<()> {
        let paths = (self.paths[0].as_path(), self.paths[1].as_path());
        for (name, r) in run(&self.python, paths, self.cache_blocks)? {
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
        for path in &self.paths {
            let _ = std::fs::remove_file(path);
        }
    }
}
