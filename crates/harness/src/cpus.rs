//! Where a benchmark's servers and its client run. On a machine with two CPUs or more the
//! benchmarks keep them apart, as on two machines: the servers' threads (and processes) on one
//! CPU, the client's on another. Left to the scheduler, a client and a server are now and then
//! stacked on one CPU and then spread again, and the same run swings by up to 2× from one
//! measurement to the next (`nbdkit file` answering 1 MiB reads at 1.3–2.0 GB/s on fio's CPU
//! and at 3.5–3.7 GB/s on the other, docs/BENCHMARKS.md). `--no-pin` on a benchmark leaves them to the
//! scheduler. Pinning is off until a benchmark turns it on ([`allow_pinning`]): the helpers a
//! benchmark shares with others pin nothing for those.
//!
//! [`process_cpu_seconds`] reads what a server process has spent, for the benchmarks that
//! report CPU per request beside their rates.

use std::sync::atomic::{AtomicBool, Ordering};

/// The CPU the servers run on.
pub(crate) const SERVER_CPU: usize = 1;
/// The CPU the client (fio, or a benchmark's own client thread) runs on.
pub(crate) const CLIENT_CPU: usize = 0;

/// Whether the benchmark running keeps its client and servers apart (not `--no-pin`).
static PIN: AtomicBool = AtomicBool::new(false);

/// Sets whether [`pin`] pins (not a benchmark's `--no-pin`, set once at its start).
pub(crate) fn allow_pinning(allowed: bool) {
    PIN.store(allowed, Ordering::Relaxed);
}

/// Whether the benchmark keeps its client and servers apart: pinning is allowed and this
/// machine lets threads run on both [`SERVER_CPU`] and [`CLIENT_CPU`].
pub(crate) fn pinned() -> bool {
    PIN.load(Ordering::Relaxed) && pinnable()
}

/// Whether this machine lets the client and the servers be kept apart (CPUs 0 and 1).
fn pinnable() -> bool {
    // SAFETY: sched_getaffinity writes the cpu_set_t it is given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0
            && libc::CPU_ISSET(SERVER_CPU, &set)
            && libc::CPU_ISSET(CLIENT_CPU, &set)
    }
}

/// Binds the calling thread (and the threads and processes it starts later) to CPU `cpu`,
/// unless pinning is off or the machine lacks the CPU; returns the mask it had, for [`unpin`].
pub(crate) fn pin(cpu: usize) -> Option<libc::cpu_set_t> {
    if !PIN.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: sched_{get,set}affinity read and write the cpu_set_t they are given.
    unsafe {
        let mut old: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) != 0
            || !libc::CPU_ISSET(cpu, &old)
        {
            return None;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        (libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0)
            .then_some(old)
    }
}

/// Restores a mask [`pin`] returned.
pub(crate) fn unpin(old: Option<libc::cpu_set_t>) {
    if let Some(old) = old {
        // SAFETY: as in `pin`.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &old) };
    }
}

/// `work` on CPU `cpu` (what it starts runs there too: a process inherits the mask of the
/// thread that starts it), the calling thread's mask restored after.
pub(crate) fn on_cpu<T>(cpu: usize, work: impl FnOnce() -> T) -> T {
    let old = pin(cpu);
    let out = work();
    unpin(old);
    out
}

/// CPU seconds (user and system, all its threads) process `pid` has used, from
/// `/proc/PID/stat`; `None` if it cannot be read (the process gone). The kernel counts in
/// clock ticks (10 ms at 100 Hz): over a run of seconds, a share of a CPU to about 1 %.
pub(crate) fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state (3), …, utime (14), stime (15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| (utime + stime) as f64 / ticks as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current() -> libc::cpu_set_t {
        // SAFETY: as in `pin`.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            set
        }
    }

    fn cpus(set: &libc::cpu_set_t) -> Vec<usize> {
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: CPU_ISSET reads the set it is given, below CPU_SETSIZE.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, set) })
            .collect()
    }

    /// A process's count grows by the CPU it spends: this thread spinning until it has used
    /// 0.3 s of CPU (by its own clock: a loaded machine may hold it off the CPU meanwhile) is
    /// counted at least 0.27 s more (the kernel's tick; other tests' threads may add), a
    /// sleeping child nothing.
    #[test]
    fn process_cpu_seconds_counts_what_a_process_spends() {
        fn thread_cpu() -> f64 {
            // SAFETY: clock_gettime writes the timespec it is given.
            let mut t: libc::timespec = unsafe { std::mem::zeroed() };
            assert_eq!(
                unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) },
                0
            );
            t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
        }
        let mut idle = std::process::Command::new("sleep")
            .arg("1")
            .spawn()
            .expect("sleep");
        let me = std::process::id();
        let before = process_cpu_seconds(me).expect("this process's stat");
        let began = thread_cpu();
        let mut x = 1u64;
        while thread_cpu() - began < 0.3 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let spent = process_cpu_seconds(me).expect("this process's stat") - before;
        let rested = process_cpu_seconds(idle.id()).expect("the sleeping child's stat");
        idle.wait().expect("sleep");
        assert!(
            spent >= 0.27,
            "0.3 s of this thread's CPU counted {spent} s"
        );
        assert!(rested < 0.05, "the sleeping child spent {rested} s");
        assert_eq!(process_cpu_seconds(u32::MAX), None);
    }

    /// A thread of its own: the mask is per thread, and tests run side by side.
    #[test]
    fn on_cpu_binds_the_work_and_restores_the_mask() {
        std::thread::spawn(|| {
            let before = cpus(&current());
            if !pinnable() {
                return;
            }
            allow_pinning(true);
            // A process started inside runs on the CPU too.
            let child = on_cpu(SERVER_CPU, || {
                assert_eq!(cpus(&current()), vec![SERVER_CPU]);
                std::process::Command::new("sh")
                    .args(["-c", "grep Cpus_allowed_list /proc/self/status"])
                    .output()
                    .expect("sh")
            });
            let said = String::from_utf8_lossy(&child.stdout);
            assert!(
                said.trim().ends_with(&format!("\t{SERVER_CPU}")),
                "the child's mask: {said}"
            );
            assert_eq!(cpus(&current()), before);
        })
        .join()
        .expect("the test's thread");
    }
}
