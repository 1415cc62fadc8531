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

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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

/// The shared state of a daemon's limits.
#[derive(Clone)]
pub struct Admission {
    limits: Limits,
    total: Arc<Semaphore>,
    connections: Arc<Semaphore>,
}

impl Admission {
    pub fn new(limits: Limits) -> Admission {
        assert!(limits.connection_bytes >= UNIT && limits.total_bytes >= limits.connection_bytes);
        Admission {
            total: Arc::new(Semaphore::new(units(limits.total_bytes))),
            connections: Arc::new(Semaphore::new(limits.connections.max(1))),
            limits,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A slot for a new connection, or `None` when every slot is taken (the caller closes
    /// the connection).
    pub fn connection(&self) -> Option<ConnectionBudget> {
        let slot = self.connections.clone().try_acquire_owned().ok()?;
        Some(ConnectionBudget {
            bytes: Arc::new(Semaphore::new(units(self.limits.connection_bytes))),
            requests: Arc::new(Semaphore::new(self.limits.connection_requests.max(1))),
            total: self.total.clone(),
            cap: units(self.limits.connection_bytes),
            requests_max: self.limits.connection_requests.max(1),
            _slot: slot,
        })
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
    _slot: OwnedSemaphorePermit,
}

impl ConnectionBudget {
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
/// bounded by the daemon's budgets. Called once as a daemon starts; a no-op off glibc.
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
