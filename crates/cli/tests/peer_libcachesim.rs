//! libCacheSim, the cache simulator its users already have, on our traces and ours on its: an
//! `oracleGeneral` file written by `trace convert` is byte for byte the one libCacheSim's own
//! converter writes from it, ours reads the converter's file back to the same requests, and
//! advise's miss-ratio curve equals libCacheSim's LRU at every size it lists.
//!
//! libCacheSim comes from PyPI (`libcachesim`, its Python bindings): scripts/test.sh installs it
//! into `target/peers/venv` when no Python here has it, and names that Python in
//! `CORDILLERA_LIBCACHESIM_PYTHON`. Without it the test says SKIPPED (and fails under CI).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cordillera_testkit::process::{Bounded, COMMAND_LIMIT};

/// The peer's side: reads our file, converts it with libCacheSim's own converter, runs its LRU
/// at the sizes given (bytes). Prints one JSON object.
const PEER: &str = r#"
import json, sys
import libcachesim as lcs
ours, theirs = sys.argv[1], sys.argv[2]
sizes = [int(s) for s in sys.argv[3].split(",")]
reader = lcs.TraceReader(ours, lcs.TraceType.ORACLE_GENERAL_TRACE)
requests = reader.get_num_of_req()
lcs.Util.convert_to_oracleGeneral(reader._reader, theirs)
lru = []
for size in sizes:
    r = lcs.TraceReader(ours, lcs.TraceType.ORACLE_GENERAL_TRACE)
    lru.append(lcs.LRU(size).process_trace(r)[0])
print(json.dumps({"requests": requests, "lru_miss_ratio": lru}))
"#;

/// A Python that imports `libcachesim`: `CORDILLERA_LIBCACHESIM_PYTHON`, the one scripts/test.sh
/// installs, or `python3`.
fn peer_python() -> Option<PathBuf> {
    let installed =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/peers/venv/bin/python");
    let candidates = std::env::var_os("CORDILLERA_LIBCACHESIM_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([installed, PathBuf::from("python3")]);
    for python in candidates {
        let ok = Command::new(&python)
            .args(["-c", "import libcachesim"])
            .output_within(COMMAND_LIMIT)
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(python);
        }
    }
    None
}

fn cordillera(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(args)
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

/// 20,000 requests of 4 KiB over 5,000 blocks, skewed (a few blocks hot, most cold), reads and
/// writes, one every 10 ms: an MSR CSV trace.
fn write_trace(path: &Path) {
    let t0: u64 = 128_166_372_000_000_000;
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut text = String::new();
    for i in 0..20_000u64 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let u = (state >> 11) as f64 / (1u64 << 53) as f64;
        // Pareto-like: block = floor(5000 · u^4), so low blocks are hot.
        let block = (5000.0 * u.powi(4)) as u64;
        let op = if state >> 60 < 3 { "Write" } else { "Read" };
        text.push_str(&format!(
            "{},web,0,{op},{},4096,100\n",
            t0 + i * 100_000,
            block * 4096
        ));
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn libcachesim_and_cordillera_read_and_write_the_same_oracle_general_traces() {
    let Some(python) = peer_python() else {
        cordillera_testkit::missing(
            "libcachesim_and_cordillera_read_and_write_the_same_oracle_general_traces needs libCacheSim's Python bindings (pip install libcachesim; scripts/test.sh installs them)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    write_trace(&csv);
    let ours = dir.path().join("ours.oracleGeneral");
    let theirs = dir.path().join("theirs.oracleGeneral");
    cordillera(&[
        "trace",
        "convert",
        "--to",
        "oraclegeneral",
        csv.to_str().unwrap(),
        ours.to_str().unwrap(),
    ]);

    // Advise's miss-ratio curve on our file: the sizes libCacheSim's LRU runs at.
    let advise = json(&cordillera(&[
        "advise",
        ours.to_str().unwrap(),
        "--quick",
        "--quiet",
        "--json",
    ]));
    let curve = &advise[0]["miss_ratio_curve"];
    assert_eq!(
        curve["method"],
        "exact LRU stack distances (one pass, no sampling)"
    );
    let points = curve["points"].as_array().unwrap();
    assert!(points.len() >= 4, "{curve}");
    let sizes: Vec<String> = points
        .iter()
        .map(|p| p["cache_bytes"].as_u64().unwrap().to_string())
        .collect();

    let out = Command::new(&python)
        .args(["-c", PEER, ours.to_str().unwrap(), theirs.to_str().unwrap()])
        .arg(sizes.join(","))
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "libCacheSim: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let peer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(peer["requests"], 20_000, "{peer}");

    // The same file, field by field, as libCacheSim's own converter writes it.
    let (a, b) = (
        std::fs::read(&ours).unwrap(),
        std::fs::read(&theirs).unwrap(),
    );
    assert_eq!(a.len(), 20_000 * 24);
    assert_eq!(a.len(), b.len());
    let field = |bytes: &[u8], i: usize, at: usize, n: usize| {
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(&bytes[i * 24 + at..i * 24 + at + n]);
        u64::from_le_bytes(w)
    };
    for i in 0..20_000 {
        for (name, at, n) in [
            ("clock_time", 0, 4),
            ("obj_id", 4, 8),
            ("obj_size", 12, 4),
            ("next_access_vtime", 16, 8),
        ] {
            assert_eq!(
                field(&a, i, at, n) as i64,
                field(&b, i, at, n) as i64,
                "request {i}: {name} differs from libCacheSim's converter's"
            );
        }
    }

    // Ours reads libCacheSim's file back to the requests it was written from.
    let stats = |p: &Path| {
        json(&cordillera(&[
            "trace",
            "stats",
            p.to_str().unwrap(),
            "--json",
        ]))
    };
    let (from_csv, from_peer) = (stats(&csv), stats(&theirs));
    let bytes = |s: &serde_json::Value| {
        s["total"]["read_bytes"].as_u64().unwrap() + s["total"]["write_bytes"].as_u64().unwrap()
    };
    assert_eq!(bytes(&from_csv), bytes(&from_peer));
    for key in ["records", "wss_bytes"] {
        assert_eq!(
            from_csv["total"][key], from_peer["total"][key],
            "{key}: {from_csv} against {from_peer}"
        );
    }

    // LRU: libCacheSim's miss ratio at each size is the curve's (4 KiB objects, so bytes and
    // blocks count alike; hits as whole requests).
    let lru = peer["lru_miss_ratio"].as_array().unwrap();
    for (p, theirs) in points.iter().zip(lru) {
        let (ours, theirs) = (
            p["read_miss_ratio"].as_f64().unwrap(),
            theirs.as_f64().unwrap(),
        );
        assert!(
            (ours - theirs).abs() < 1e-9,
            "{} bytes: ours {ours}, libCacheSim {theirs}",
            p["cache_bytes"]
        );
    }
    assert!(
        lru.iter().any(|m| m.as_f64().unwrap() < 0.5),
        "the trace is skewed enough that some size hits: {peer}"
    );
}
