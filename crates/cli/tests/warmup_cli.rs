//! `cordillera warmup simulate` as a process: its JSON counts equal the library's LRU run on
//! the same generated workload, and bad input is a clear error.

use std::process::Command;

use cordillera_trace::read::RecordReader;
use cordillera_warmup::cache::Lru;
use cordillera_warmup::sim::simulate;

const BIN: &str = env!("CARGO_BIN_EXE_cordillera");
const SPEC: &str = "gen:zipf:count=50000,alpha=1.1,span=256m";

#[test]
fn simulate_prints_the_librarys_lru_counts() {
    let out = Command::new(BIN)
        .args(["warmup", "simulate", SPEC, "--cache-size", "4m", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let mut reader = cordillera_sim::workload::open_spec(SPEC).unwrap();
    let mut records = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        records.push(r);
    }
    let counts = simulate(&mut Lru::new(1024), records);
    assert_eq!(v["cache_blocks"], 1024);
    assert_eq!(v["policy"], "lru");
    assert_eq!(v["requests"], 50_000);
    assert_eq!(v["read_block_accesses"], counts.read_block_accesses);
    assert_eq!(v["read_block_hits"], counts.read_block_hits);
    assert!(counts.read_block_hits > 0 && counts.read_block_hits < counts.read_block_accesses);
}

#[test]
fn a_bad_policy_or_size_is_a_clear_error() {
    for (policy, size, expected) in [
        ("arc", "4m", "unknown cache policy"),
        ("lru", "lots", "bad size"),
        ("lru", "20000g", "over the simulator's limit"),
    ] {
        let out = Command::new(BIN)
            .args([
                "warmup",
                "simulate",
                SPEC,
                "--policy",
                policy,
                "--cache-size",
                size,
            ])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{policy} {size}: {err}");
    }
}
