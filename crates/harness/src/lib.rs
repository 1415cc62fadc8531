//! Harnesses that drive real processes — the `cordillera` binary's daemons, peer tools and
//! clients — and report what they measured:
//!
//! - benchmarks against the peers users know, each ratio measured in the same run: the store
//!   (`store_bench`: `store bench`), the off-loading volume against `nbdkit file`
//!   (`volume_bench`: `volume bench`, its fio runs in `fio_nbd`), its cache warm-up (`volume_warmup_bench`), Everest's worst case on two
//!   servers (`volume_worst_case`: `volume worst-case`), PostgreSQL's
//!   pgbench on ext4 on a volume or a Sierra object (`volume_pgbench`, `cluster_pgbench`), the
//!   Sierra cluster's day, Table 5 and Figure 12 (`cluster_bench`), narrow against wide pools and
//!   the restripe's rate (`pool_bench`), the NBD port with TLS against nbdkit's with the same
//!   pre-shared key (`tls_bench`: `bench tls`);
//! - a trace replayed against a live NBD export (`live_replay`: `cordillera replay`);
//! - the kill-and-fault campaign (`chaos`: `cordillera chaos`);
//! - in-process benchmarks against a reference measured in the same run (`bench`: `bench
//!   trace|sim|rangemap|cache`; the cache simulator also against libCacheSim, `cache_peer`), and the command's own cost on growing inputs, each run a child
//!   process whose time and peak memory are measured (`lab_bench`: `bench lab-bonfire`;
//!   `advise_bench`: `bench advise`).
//!
//! Each module has its clap arguments and a `run`; the command line only dispatches to them.
//! Benchmarks against a peer keep the servers on one CPU and the client on another (`cpus`).
//! The daemons are started from the running executable ([`this_program`]), so the harnesses
//! run from the `cordillera` binary.

pub mod advise_bench;
pub mod bench;
pub mod cache_peer;
pub mod chaos;
pub mod cluster_bench;
pub mod cluster_pgbench;
mod cpus;
mod fio_nbd;
pub mod lab_bench;
pub mod live_replay;
pub mod pool_bench;
pub mod store_bench;
pub mod tls_bench;
pub mod volume_bench;
pub mod volume_pgbench;
pub mod volume_warmup_bench;
pub mod volume_worst_case;

/// The running executable, to start the daemons from: `/proc/self/exe` where there is one, so
/// that a binary rebuilt or replaced while a long campaign or benchmark runs (its path now a
/// different file, or none) does not stop it mid-way; else its path.
pub fn this_program() -> std::io::Result<std::path::PathBuf> {
    let proc_exe = std::path::Path::new("/proc/self/exe");
    if proc_exe.exists() {
        return Ok(proc_exe.to_path_buf());
    }
    std::env::current_exe()
}

/// The median of `values`: of an even count the mean of the two middle ones, NaN when there
/// are none.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod median_tests {
    use super::median;

    /// Of an odd count the middle value; of an even count the mean of the two middle ones
    /// (four rounds alternating which server goes first must not pick one order's ratio).
    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![2.0, 0.5, 1.0]), 1.0);
        assert_eq!(median(vec![1.84, 1.03, 1.88, 1.09]), (1.09 + 1.84) / 2.0);
        assert_eq!(median(vec![3.0]), 3.0);
        assert!(median(Vec::new()).is_nan());
    }
}
