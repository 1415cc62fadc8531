//! Which of several `cluster mds --etcd` processes is active: each campaigns for the leader key
//! `PREFIX leader` with a transaction that creates it only if it does not exist, bound to its own
//! etcd lease; the one that created it leads until the key goes (its lease lapsed, or it
//! resigned), the others try again every quarter of the lease time.
//!
//! The leader acts only while it [`Standing::Holds`]: until its lease's time has passed since
//! the last renewal etcd confirmed, or while etcd cannot answer at all (no quorum: no other MDS
//! can be elected either — etcd expires no lease without a quorum and renews them all when it
//! has one again — and the leader keeps granting the chunk servers their leases without
//! changing any state: every change is an etcd transaction conditioned on the leader key, see
//! `mds_etcd`). Between the two — its lease's time passed while a renewal waits for an answer,
//! or the process was paused (SIGSTOP, a long stall) — it is unsure and sends nothing; etcd
//! saying the lease is gone ends it at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use crate::etcd::{Compare, Etcd, EtcdError, Op};

/// What the renewing thread last learned.
#[derive(Clone, Copy, Debug)]
struct Renewal {
    /// Acting is safe until this (the send time of the last confirmed renewal plus its TTL).
    confirmed_until: Instant,
    /// etcd could not answer the last renewal, found so at this time.
    unavailable_at: Option<Instant>,
    /// etcd said the lease is gone.
    lost: bool,
}

/// What a leader knows of its leadership.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Its lease is confirmed (or etcd cannot answer anyone: no one else can be elected).
    Holds,
    /// Its lease's time has passed without a renewal confirmed or refused (a renewal still
    /// waiting for etcd, or the process was paused): it acts on nothing until it knows.
    Unsure,
    /// etcd said its lease is gone: it must step down.
    Lost,
}

pub struct Leadership {
    /// The leader key's create revision: the term of this leadership (it grows with every
    /// election) and the condition of every write.
    pub revision: i64,
    lease: i64,
    ttl: Duration,
    renewal: Arc<Mutex<Renewal>>,
    stop: Arc<AtomicBool>,
    keeper: Option<JoinHandle<()>>,
    endpoints: Vec<String>,
}

fn leader_key(prefix: &[u8]) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(b"leader");
    k
}

impl Leadership {
    /// Campaigns until this process (named `name`) holds the leader key; `waiting` is told who
    /// leads while it waits.
    pub fn campaign(
        endpoints: &[String],
        prefix: &[u8],
        name: &str,
        ttl_s: u64,
        mut waiting: impl FnMut(Option<&str>),
        stop: &AtomicBool,
    ) -> Result<Leadership> {
        let ttl = Duration::from_secs(ttl_s);
        let retry = (ttl / 4).max(Duration::from_millis(250));
        let mut etcd = Etcd::new(endpoints, retry.max(Duration::from_secs(2)))?;
        let key = leader_key(prefix);
        let mut lease: Option<(i64, Instant)> = None;
        let mut last_seen: Option<String> = None;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(anyhow!("stopped while standing by"));
            }
            let attempt = (|| -> Result<Option<Leadership>, EtcdError> {
                // A lease of our own, fresh enough that the key would outlive this attempt.
                let sent = Instant::now();
                let id = match lease {
                    Some((id, granted)) if granted.elapsed() < ttl / 2 => {
                        let left = etcd.keep_alive(id)?;
                        if left <= 0 {
                            let id = etcd.grant(ttl_s)?;
                            lease = Some((id, sent));
                            id
                        } else {
                            lease = Some((id, sent));
                            id
                        }
                    }
                    _ => {
                        if let Some((old, _)) = lease.take() {
                            let _ = etcd.revoke(old);
                        }
                        let id = etcd.grant(ttl_s)?;
                        lease = Some((id, sent));
                        id
                    }
                };
                let (won, found) = etcd.txn(
                    &[Compare::CreateRevision(key.clone(), 0)],
                    &[Op::Put {
                        key: key.clone(),
                        value: name.as_bytes().to_vec(),
                        lease: id,
                    }],
                    &[Op::Get { key: key.clone() }],
                )?;
                if won {
                    let mine = etcd.get(&key)?.filter(|kv| kv.value == name.as_bytes());
                    let Some(kv) = mine else {
                        return Ok(None); // lapsed already: try again
                    };
                    return Ok(Some(Leadership::start(
                        endpoints.to_vec(),
                        kv.create_revision,
                        id,
                        ttl,
                        sent,
                    )));
                }
                let holder = found
                    .first()
                    .and_then(|kvs| kvs.first())
                    .map(|kv| String::from_utf8_lossy(&kv.value).to_string());
                if holder != last_seen {
                    waiting(holder.as_deref());
                    last_seen = holder;
                }
                Ok(None)
            })();
            match attempt {
                Ok(Some(leadership)) => return Ok(leadership),
                Ok(None) => {}
                Err(e @ EtcdError::Unreachable(_)) => {
                    tracing::warn!(error = %e, "standing by: etcd does not answer");
                    lease = None;
                }
                Err(e) => tracing::warn!(error = %e, "standing by: etcd refused"),
            }
            std::thread::sleep(retry);
        }
    }

    fn start(
        endpoints: Vec<String>,
        revision: i64,
        lease: i64,
        ttl: Duration,
        sent: Instant,
    ) -> Leadership {
        let renewal = Arc::new(Mutex::new(Renewal {
            confirmed_until: sent + ttl,
            unavailable_at: None,
            lost: false,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let keeper = {
            let renewal = renewal.clone();
            let stop = stop.clone();
            let endpoints = endpoints.clone();
            std::thread::Builder::new()
                .name("mds-lease".into())
                .spawn(move || keep(endpoints, lease, ttl, renewal, stop))
                .expect("a thread")
        };
        Leadership {
            revision,
            lease,
            ttl,
            renewal,
            stop,
            keeper: Some(keeper),
            endpoints,
        }
    }

    /// Whether this process may act as the leader now.
    pub fn standing(&self) -> Standing {
        let r = *self.renewal.lock().expect("renewal");
        let now = Instant::now();
        if r.lost {
            Standing::Lost
        } else if now < r.confirmed_until || r.unavailable_at.is_some_and(|at| now < at + self.ttl)
        {
            Standing::Holds
        } else {
            Standing::Unsure
        }
    }

    /// Whether etcd is answering (false: the leader holds on without changing state).
    pub fn etcd_available(&self) -> bool {
        self.renewal
            .lock()
            .expect("renewal")
            .unavailable_at
            .is_none()
    }

    /// Gives the leadership up: stops renewing and revokes the lease (its key goes with it).
    pub fn resign(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
        if let Ok(mut etcd) = Etcd::new(&self.endpoints, Duration::from_secs(2)) {
            let _ = etcd.revoke(self.lease);
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Renews `lease` every third of its time until stopped or lost.
fn keep(
    endpoints: Vec<String>,
    lease: i64,
    ttl: Duration,
    renewal: Arc<Mutex<Renewal>>,
    stop: Arc<AtomicBool>,
) {
    let period = (ttl / 3).max(Duration::from_millis(200));
    let Ok(mut etcd) = Etcd::new(&endpoints, period) else {
        renewal.lock().expect("renewal").lost = true;
        return;
    };
    while !stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let outcome = etcd.keep_alive(lease);
        let mut r = renewal.lock().expect("renewal");
        match outcome {
            Ok(left) if left > 0 => {
                r.confirmed_until = sent + Duration::from_secs(left as u64);
                r.unavailable_at = None;
            }
            Ok(_) => {
                tracing::warn!("the MDS's etcd lease has lapsed: stepping down");
                r.lost = true;
                return;
            }
            Err(EtcdError::Unreachable(e)) => {
                if r.unavailable_at.is_none() {
                    tracing::warn!(error = %e, "etcd does not answer: holding on, changing nothing");
                }
                r.unavailable_at = Some(Instant::now());
            }
            Err(e) => {
                tracing::warn!(error = %e, "etcd refused the MDS's lease: stepping down");
                r.lost = true;
                return;
            }
        }
        drop(r);
        let next = sent + period;
        while Instant::now() < next && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
