//! libCacheSim, the cache simulator storage researchers already use, as `bench cache`'s peer:
//! the same block accesses written as its `oracleGeneral` trace (one 4 KiB object per block a
//! request touches, as our cache sees them), its LRU, FIFO, CLOCK and SIEVE run through its Python
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
/// its default one-bit counter — CLOCK's second chance — and `Sieve`).
pub const POLICIES: [&str; 4] = ["lru", "fifo", "clock", "sieve"];

/// Runs each policy from an empty cache of `size` bytes over the file; prints one JSON object:
/// policy → seconds, requests, hits (from the miss ratio libCacheSim returns, a double).
const PEER: &str = r#"
import json, sys, time
import libcachesim as lcs
path, size = sys.argv[1], int(sys.argv[2])
classes = {"lru": lcs.LRU, "fifo": lcs.FIFO, "clock": lcs.Clock, "sieve": lcs.Sieve}
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
