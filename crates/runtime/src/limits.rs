//! What one client can take from a daemon: connections, and memory per connection and in
//! total. Every daemon that serves clients (the store server, the NBD server) charges each
//! request, when it is read, for the bytes it brings and the bytes its reply will hold; the
//! charge is released only once the reply is written to the socket. A client that stops
//! reading its replies therefore stops being read from once its connection's budget is used,
//! and the server's memory stays bounded whatever it sends.
//!
//! Budgets count KiB units on tokio semaphores (FIFO, so a large request is not starved by
//! small ones). A single request larger than a budget is charged the whole budget: it runs
//! alone rather than never.
//!
//! Slots are never held for good by clients that do nothing: a connection's handshake runs
//! within a time limit ([`ConnectionBudget::handshake`]), and when every slot is taken a new
//! connection takes the slot of the oldest connection still in its handshake, or — where the
//! daemon allows it ([`Admission::evict_idle`], the store) — of the connection idle longest
//! (nothing in flight, nothing read for [`IDLE_EVICT_AFTER`]).

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

const UNIT: u64 = 1024;

/// Limits of one daemon.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Bytes of requests in flight and replies not yet written, per connection.
    pub connection_bytes: u64,
    /// Requests in flight or with replies not yet written, per connection.
    pub connection_requests: usize,
    /// Bytes over every connection.
    pub total_bytes: u64,
    /// Connections open at once; more are closed as soon as accepted.
    pub connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connection_bytes: 64 << 20,
            connection_requests: 1024,
            total_bytes: 1 << 30,
            connections: 512,
        }
    }
}

/// An established connection idle this long (nothing in flight, nothing read) may give its
/// slot to a new one when every slot is taken, where the daemon allows it.
pub const IDLE_EVICT_AFTER: Duration = Duration::from_secs(10);

/// The shared state of a daemon's limits.
#[derive(Clone)]
pub struct Admission {
    limits: Limits,
    total: Arc<Semaphore>,
    connections: Arc<Semaphore>,
    registry: Arc<Mutex<Registry>>,
    /// Established connections idle this long may give their slots up (`None`: never).
    evict_idle: Option<Duration>,
}

/// The connections holding slots, oldest first.
#[derive(Default)]
struct Registry {
    next: u64,
    open: BTreeMap<u64, Tracked>,
}

struct Tracked {
    evict: Arc<Notify>,
    established: Arc<AtomicBool>,
    /// Milliseconds since the daemon's epoch when it last read something.
    active_ms: Arc<AtomicU64>,
    /// Its byte budget: all of it available means nothing in flight.
    bytes: Arc<Semaphore>,
    cap: usize,
}

fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64
}

impl Admission {
    pub fn new(limits: Limits) -> Admission {
        assert!(limits.connection_bytes >= UNIT && limits.total_bytes >= limits.connection_bytes);
        Admission {
            total: Arc::new(Semaphore::new(units(limits.total_bytes))),
            connections: Arc::new(Semaphore::new(limits.connections.max(1))),
            registry: Default::default(),
            evict_idle: None,
            limits,
        }
    }

    /// Lets a new connection take the slot of an established one idle for `after` (nothing
    /// in flight, nothing read; [`IDLE_EVICT_AFTER`] in the daemons) when every slot is taken
    /// — for daemons whose clients reconnect by themselves: the store.
    pub fn evict_idle(mut self, after: Duration) -> Admission {
        self.evict_idle = Some(after);
        self
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A slot for a new connection, or `None` when every slot is taken (the caller closes
    /// the connection). The connection is in its handshake until
    /// [`ConnectionBudget::established`].
    pub fn connection(&self) -> Option<ConnectionBudget> {
        let slot = self.connections.clone().try_acquire_owned().ok()?;
        Some(self.budget(slot))
    }

    fn budget(&self, slot: OwnedSemaphorePermit) -> ConnectionBudget {
        let cap = units(self.limits.connection_bytes);
        let bytes = Arc::new(Semaphore::new(cap));
        let (evict, established) = (Arc::new(Notify::new()), Arc::new(AtomicBool::new(false)));
        let active_ms = Arc::new(AtomicU64::new(now_ms()));
        let id = {
            let mut r = self.registry.lock().expect("registry");
            let id = r.next;
            r.next += 1;
            r.open.insert(
                id,
                Tracked {
                    evict: evict.clone(),
                    established: established.clone(),
                    active_ms: active_ms.clone(),
                    bytes: bytes.clone(),
                    cap,
                },
            );
            id
        };
        ConnectionBudget {
            bytes,
            requests: Arc::new(Semaphore::new(self.limits.connection_requests.max(1))),
            total: self.total.clone(),
            cap,
            requests_max: self.limits.connection_requests.max(1),
            id,
            registry: self.registry.clone(),
            evict,
            established,
            active_ms,
            _slot: slot,
        }
    }

    /// Asks the oldest connection still in its handshake — or, if allowed, the one idle
    /// longest — to give up its slot; false if there is none.
    pub fn evict_one(&self) -> bool {
        let mut r = self.registry.lock().expect("registry");
        let handshaking = r
            .open
            .iter()
            .find(|(_, t)| !t.established.load(Ordering::Relaxed))
            .map(|(&id, _)| id);
        let idle = |after: Duration| {
            let now = now_ms();
            r.open
                .iter()
                .filter(|(_, t)| t.bytes.available_permits() == t.cap)
                .map(|(&id, t)| (now.saturating_sub(t.active_ms.load(Ordering::Relaxed)), id))
                .filter(|&(idle, _)| idle >= after.as_millis() as u64)
                .max()
                .map(|(_, id)| id)
        };
        let victim = handshaking.or_else(|| self.evict_idle.and_then(idle));
        let Some(victim) = victim.and_then(|id| r.open.remove(&id)) else {
            return false;
        };
        victim.evict.notify_one();
        true
    }

    /// Connections holding slots, and how many of them are still in their handshake.
    pub fn connections_open(&self) -> (usize, usize) {
        let r = self.registry.lock().expect("registry");
        let handshaking = r
            .open
            .values()
            .filter(|t| !t.established.load(Ordering::Relaxed))
            .count();
        (r.open.len(), handshaking)
    }

    /// Bytes charged now over every connection (for tests and status).
    pub fn total_charged_bytes(&self) -> u64 {
        (units(self.limits.total_bytes) - self.total.available_permits()) as u64 * UNIT
    }
}

/// One connection's budget; dropping it frees the connection's slot.
pub struct ConnectionBudget {
    bytes: Arc<Semaphore>,
    requests: Arc<Semaphore>,
    total: Arc<Semaphore>,
    cap: usize,
    requests_max: usize,
    id: u64,
    registry: Arc<Mutex<Registry>>,
    evict: Arc<Notify>,
    established: Arc<AtomicBool>,
    active_ms: Arc<AtomicU64>,
    _slot: OwnedSemaphorePermit,
}

impl Drop for ConnectionBudget {
    fn drop(&mut self) {
        if let Ok(mut r) = self.registry.lock() {
            r.open.remove(&self.id);
        }
    }
}

/// Why a handshake ended without the connection being established.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeEnd {
    #[error("no handshake within {0:?} of connecting (handshake timeout)")]
    TimedOut(Duration),
    #[error("every connection slot was taken: this one, still in its handshake, gave its slot to a newer one")]
    Evicted,
}

impl ConnectionBudget {
    /// Runs the connection's handshake `work` for at most `limit`; once it is done the
    /// connection is established (no longer the first to give up its slot). Ends early if
    /// the slot is taken for a newer connection meanwhile.
    pub async fn handshake<T>(
        &mut self,
        limit: Duration,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, HandshakeEnd> {
        let evict = self.evict.clone();
        tokio::select! {
            done = tokio::time::timeout(limit, work) => {
                let done = done.map_err(|_| HandshakeEnd::TimedOut(limit))?;
                self.established();
                Ok(done)
            }
            _ = evict.notified() => Err(HandshakeEnd::Evicted),
        }
    }

    /// The connection is past its handshake (a dialled one from the start).
    pub fn established(&self) {
        self.established.store(true, Ordering::Relaxed);
        self.touch();
    }

    /// Something was read from the connection: it is not idle.
    pub fn touch(&self) {
        self.active_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// Completes once the connection is asked to give up its slot (every slot taken, and it
    /// the longest idle, where the daemon allows that).
    pub async fn evicted(&self) {
        self.evict.notified().await
    }

    /// Requests in flight or with replies not yet written, at most (each holds a charge).
    pub fn requests_max(&self) -> usize {
        self.requests_max
    }

    /// Waits until `bytes` fit in this connection's and the daemon's budgets, and one more
    /// request may be in flight; the returned charge releases them when dropped.
    pub async fn charge(&self, bytes: u64) -> Charge {
        self.charge_to(bytes, true).await
    }

    /// As [`charge`](Self::charge), against this connection's budget only: for small frames
    /// (a cluster's control messages), which must not queue behind large ones waiting for the
    /// daemon's budget. Their memory is bounded by each connection's budget.
    pub async fn charge_connection_only(&self, bytes: u64) -> Charge {
        self.charge_to(bytes, false).await
    }

    async fn charge_to(&self, bytes: u64, daemon_too: bool) -> Charge {
        let n = units(bytes).clamp(1, self.cap) as u32;
        let request = self
            .requests
            .clone()
            .acquire_owned()
            .await
            .expect("never closed");
        let own = self
            .bytes
            .clone()
            .acquire_many_owned(n)
            .await
            .expect("never closed");
        let total = match daemon_too {
            true => Some(
                self.total
                    .clone()
                    .acquire_many_owned(n)
                    .await
                    .expect("never closed"),
            ),
            false => None,
        };
        Charge {
            own,
            total,
            _request: request,
        }
    }

    /// Bytes charged now on this connection.
    pub fn charged_bytes(&self) -> u64 {
        (self.cap - self.bytes.available_permits()) as u64 * UNIT
    }
}

/// What one request holds until its reply is written.
#[derive(Debug)]
pub struct Charge {
    own: OwnedSemaphorePermit,
    total: Option<OwnedSemaphorePermit>,
    _request: OwnedSemaphorePermit,
}

impl Charge {
    /// Releases what the request holds beyond `bytes` (its reply turned out smaller than
    /// charged).
    pub fn shrink_to(&mut self, bytes: u64) {
        let keep = units(bytes).max(1);
        let held = self.own.num_permits();
        if keep < held {
            drop(self.own.split(held - keep));
            if let Some(total) = &mut self.total {
                drop(total.split(held - keep));
            }
        }
    }
}

fn units(bytes: u64) -> usize {
    bytes.div_ceil(UNIT) as usize
}

/// Accepts the next connection. When accepting fails for want of descriptors or memory
/// (EMFILE, ENFILE, ENOBUFS, ENOMEM), waits and retries — from 10 ms, doubling to 1 s — so
/// the daemon serves new clients as soon as descriptors free up, with one WARN per episode;
/// other failures (a connection aborted before it was accepted) are skipped.
pub async fn accept(listener: &TcpListener, daemon: &'static str) -> (TcpStream, SocketAddr) {
    let mut backoff = Duration::from_millis(10);
    let mut failing = false;
    loop {
        match listener.accept().await {
            Ok(accepted) => {
                if failing {
                    tracing::info!(daemon, "accepting connections again");
                }
                return accepted;
            }
            Err(e) if is_resource_error(&e) => {
                if !failing {
                    tracing::warn!(daemon, error = %e, "cannot accept connections (out of descriptors or memory); retrying");
                    failing = true;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => {
                tracing::debug!(daemon, error = %e, "accept failed; continuing");
            }
        }
    }
}

/// Accepts the next connection that fits the daemon's connection limit ([`accept`], then
/// [`Admission::connection`]); connections over the limit are closed at once, with a WARN at
/// the 1st, 2nd, 4th, … refusal.
pub async fn accept_admitted(
    listener: &TcpListener,
    admission: &Admission,
    daemon: &'static str,
    refused: &mut u64,
) -> (TcpStream, SocketAddr, ConnectionBudget) {
    loop {
        let (stream, peer) = accept(listener, daemon).await;
        if let Some(budget) = admission.connection() {
            let _ = stream.set_nodelay(true);
            return (stream, peer, budget);
        }
        // Every slot is taken: the oldest connection still in its handshake (or, where
        // allowed, the one idle longest) gives its slot up, and this one takes it.
        if admission.evict_one() {
            let freed = tokio::time::timeout(
                Duration::from_secs(1),
                admission.connections.clone().acquire_owned(),
            )
            .await;
            if let Ok(Ok(slot)) = freed {
                tracing::info!(daemon, %peer, "every connection slot taken: one still in its handshake (or idle) gave its slot up");
                let _ = stream.set_nodelay(true);
                return (stream, peer, admission.budget(slot));
            }
        }
        *refused += 1;
        if refused.is_power_of_two() {
            tracing::warn!(daemon, %peer, refused = *refused, limit = admission.limits().connections, "too many connections; closing new ones");
        }
    }
}

fn is_resource_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) | Some(libc::ENOMEM)
    )
}

/// Keeps freed request and reply buffers in the process's heap for the next request, instead
/// of returning their pages to the kernel at once: with glibc's defaults a buffer of 128 KiB
/// or more is an `mmap` of its own, or the heap is trimmed with `madvise` as soon as it frees,
/// so every large request paid page faults on fresh pages (a third of the CPU time of 1 MiB
/// NBD reads). Freed memory then stays with the process up to the trim threshold (512 MiB)
/// instead of going back to the kernel at once; what requests hold at any moment is still
/// bounded by the daemon's budgets. Called once as a daemon starts; a no-op off glibc, and for
/// the `cordillera` binary, which allocates with mimalloc (this serves programs that embed the
/// servers with the system allocator: tests, other binaries).
pub fn keep_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before the daemon's threads
    // allocate heavily, and glibc serialises it with its own locks in any case.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_daemon_takes_the_slot_of_a_handshake_then_of_the_longest_idle() {
        let limits = Limits {
            connection_bytes: 64 << 10,
            connection_requests: 4,
            total_bytes: 256 << 10,
            connections: 3,
        };
        let admission = Admission::new(limits.clone()).evict_idle(Duration::from_millis(200));
        let a = admission.connection().unwrap();
        let b = admission.connection().unwrap();
        let mut c = admission.connection().unwrap();
        a.established();
        b.established();
        assert_eq!(admission.connections_open(), (3, 1));
        // c is in its handshake: it is the one asked to leave, and its handshake ends.
        let waiting = tokio::spawn(async move {
            let end = c
                .handshake(Duration::from_secs(30), std::future::pending::<()>())
                .await;
            (c, end)
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(admission.evict_one());
        let (c, end) = waiting.await.unwrap();
        assert!(matches!(end, Err(HandshakeEnd::Evicted)), "{end:?}");
        drop(c);
        // Only established ones are left, none idle long enough: nobody is asked.
        let d = admission.connection().unwrap();
        d.established();
        assert!(!admission.evict_one());
        // A connection with something in flight is never idle; the idle longest goes.
        let _charge = a.charge(4096).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
        d.touch();
        assert!(admission.evict_one());
        tokio::time::timeout(Duration::from_secs(1), b.evicted())
            .await
            .expect("b, idle longest with nothing in flight, is asked to leave");
        // Without idle eviction, established connections keep their slots.
        let plain = Admission::new(limits);
        let e = plain.connection().unwrap();
        e.established();
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(!plain.evict_one());
        // A handshake that takes too long ends by itself.
        let mut f = plain.connection().unwrap();
        let end = f
            .handshake(Duration::from_millis(50), std::future::pending::<()>())
            .await;
        assert!(matches!(end, Err(HandshakeEnd::TimedOut(_))), "{end:?}");
    }

    #[tokio::test]
    async fn charges_wait_for_budget_and_shrink() {
        let admission = Admission::new(Limits {
            connection_bytes: 64 << 10,
            connection_requests: 4,
            total_bytes: 96 << 10,
            connections: 2,
        });
        let a = admission.connection().unwrap();
        let b = admission.connection().unwrap();
        assert!(
            admission.connection().is_none(),
            "a third connection is refused"
        );
        let mut big = a.charge(1 << 30).await; // clamped to the connection's budget
        assert_eq!(a.charged_bytes(), 64 << 10);
        // The connection is full: another charge waits.
        let blocked = tokio::time::timeout(Duration::from_millis(50), a.charge(1)).await;
        assert!(blocked.is_err());
        // Only 32 KiB are left in total: b's 40 KiB waits until a's charge shrinks.
        let waiting = tokio::spawn(async move {
            let c = b.charge(40 << 10).await;
            (b, c)
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        big.shrink_to(4096);
        let (b, _c) = waiting.await.unwrap();
        assert_eq!(a.charged_bytes(), 4 << 10);
        assert_eq!(b.charged_bytes(), 40 << 10);
        assert_eq!(admission.total_charged_bytes(), 44 << 10);
        drop(big);
        assert_eq!(admission.total_charged_bytes(), 40 << 10);
        drop(a);
        assert!(
            admission.connection().is_some(),
            "a closed connection frees its slot"
        );
    }

    #[tokio::test]
    async fn requests_in_flight_are_counted() {
        let admission = Admission::new(Limits {
            connection_requests: 2,
            ..Limits::default()
        });
        let c = admission.connection().unwrap();
        let _x = c.charge(1).await;
        let _y = c.charge(1).await;
        assert!(tokio::time::timeout(Duration::from_millis(50), c.charge(1))
            .await
            .is_err());
    }
}
