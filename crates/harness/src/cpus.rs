//! Where a benchmark's servers and its client run. On a machine with two CPUs or more the
//! benchmarks keep them apart, as on two machines: the servers' threads (and processes) on one
//! CPU, the client's on another. Left to the scheduler, a client and a server are now and then
//! stacked on one CPU and then spread again, and the same run swings by up to 2× from one
//! measurement to the next (`nbdkit file` answering 1 MiB reads at 1.3–2.0 GB/s on fio's CPU
//! and at 3.5–3.7 GB/s on the other, docs/BENCHMARKS.md). `--no-pin` on a benchmark leaves them to the
//! scheduler. Pinning is off until a benchmark turns it on ([`allow_pinning`]): the helpers a
//! benchmark shares with others pin nothing for those.

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
