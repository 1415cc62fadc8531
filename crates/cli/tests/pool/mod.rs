//! What the pool's tests share: `cordillera pool serve` started and driven through its command
//! line, and a pool of member arrays.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cordillera_testkit::process::{free_addr, Bounded, Proc, COMMAND_LIMIT};

/// Two free loopback addresses for a pool's NBD and HTTP endpoints, never the same: each is
/// found by binding port 0 and letting it go, and the kernel may hand the same port out twice
/// in a row (a pool once got one port for both and could not start).
pub fn two_free_addrs() -> (std::net::SocketAddr, std::net::SocketAddr) {
    let first = free_addr().unwrap();
    loop {
        let second = free_addr().unwrap();
        if second != first {
            return (first, second);
        }
    }
}

pub fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_cordillera"))
}

pub struct Pool {
    pub proc: Proc,
    pub nbd: String,
    pub http: String,
}

impl Pool {
    /// `pool serve` in `dir` (new arrays `a0`, `a1`… when `arrays` > 0), restripe rate as given.
    pub fn start(dir: &Path, arrays: usize, extra: &[&str]) -> Result<Pool, String> {
        let (nbd, http) = two_free_addrs();
        let mut args: Vec<String> = vec![
            "pool".into(),
            "serve".into(),
            "--dir".into(),
            dir.join("meta").display().to_string(),
            "--nbd".into(),
            nbd.to_string(),
            "--http".into(),
            http.to_string(),
            "--disk-size".into(),
            "64m".into(),
        ];
        for a in 0..arrays {
            args.push("--array".into());
            args.push(dir.join(format!("a{a}")).display().to_string());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let (proc, _) = Proc::spawn_until(binary(), &args, &["cordillera pool: "])?;
        Ok(Pool {
            proc,
            nbd: nbd.to_string(),
            http: http.to_string(),
        })
    }

    pub fn url(&self, volume: &str) -> String {
        format!("nbd://{}/{volume}", self.nbd)
    }

    /// `cordillera pool ARGS… --server HTTP`: (success, output).
    pub fn cli(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(binary())
            .arg("pool")
            .args(args)
            .args(["--server", &self.http])
            .output_within(COMMAND_LIMIT)
            .unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let (ok, text) = self.cli(args);
        assert!(
            ok,
            "pool {args:?}:\n{text}\nserver log:\n{}",
            self.proc.log()
        );
        text
    }

    pub fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["status", "--json"])).unwrap()
    }

    pub fn volume(&self, name: &str) -> serde_json::Value {
        self.status()["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no volume {name}"))
    }

    /// Waits until no volume is being restriped.
    pub fn wait_restriped(&self, limit: Duration) -> serde_json::Value {
        let deadline = Instant::now() + limit;
        loop {
            let s = self.status();
            if s["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|v| v["restripe"].is_null())
            {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "restripe not done after {limit:?}: {s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A pool serving two RAID-5 arrays of five member files each under `dir` (16 MiB disks,
/// 64 KiB units) with `options` added; also the member list of array `a` (for `add-array`).
pub fn member_pool(dir: &std::path::Path, options: &[&str]) -> (Pool, impl Fn(usize) -> String) {
    let members = {
        let dir = dir.to_path_buf();
        move |a: usize| -> String {
            (0..5)
                .map(|d| dir.join(format!("a{a}d{d}")).display().to_string())
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    let (nbd, http) = two_free_addrs();
    let mut args: Vec<String> = [
        "pool",
        "serve",
        "--dir",
        &dir.join("meta").display().to_string(),
        "--nbd",
        &nbd.to_string(),
        "--http",
        &http.to_string(),
        "--disk-size",
        "16m",
        "--unit",
        "64k",
        "--array",
        &members(0),
        "--array",
        &members(1),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(options.iter().map(|s| s.to_string()));
    let (proc, _) = Proc::spawn_until(binary(), &args, &["cordillera pool: "]).unwrap();
    let pool = Pool {
        proc,
        nbd: nbd.to_string(),
        http: http.to_string(),
    };
    (pool, members)
}
