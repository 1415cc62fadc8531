//! `cordillera volume serve --cluster MDS --object NAME`: an object of a Sierra cluster
//! exported over NBD. The object client core (`cordillera_gears::client`) runs on one task;
//! NBD requests reach it on a channel and are answered when the cluster answers.
//!
//! Flush and FUA: a chunk server acknowledges a write only once it is durable on every replica
//! (each replica's write is followed by `fdatasync`) or on r loggers, so every completed write
//! is already durable; a flush and a FUA write need nothing more.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use cordillera_gears::client::{ClientConfig, ClientError, Done, ObjectClient};
use cordillera_gears::model::{ObjectId, ServerId};
use cordillera_gears::protocol::Endpoint;
use cordillera_wire::sierra::Frame;

use super::net::{Net, NetEvent};
use super::server::fetch_spec;
use crate::nbd_server::{Backend, Completion, ExportConfig, Op};

pub struct ClusterVolumeOptions {
    pub mds: String,
    pub object: String,
    /// Creates the object with this size if it does not exist.
    pub size: Option<u64>,
    pub nbd: SocketAddr,
    pub export: ExportConfig,
    /// Serve `/metrics` (Prometheus) and `/status` (JSON) here: the client's requests, retries,
    /// timeouts and failures.
    pub http: Option<String>,
    /// Listen beyond loopback without credentials (`--insecure`); refused otherwise.
    pub insecure: bool,
    /// The links to the MDS and chunk servers inside TLS with the cluster's key.
    pub tls: Option<super::net::ClusterTls>,
}

/// The NBD port beyond loopback only with `--tls require`, `/metrics` only on loopback (it
/// has no credentials yet), unless `--insecure`.
fn check_exposure(o: &ClusterVolumeOptions) -> Result<()> {
    use std::net::ToSocketAddrs;
    let require = o.export.tls.policy() == cordillera_wire::nbd::haggle::TlsPolicy::Require;
    let mut ports = vec![("NBD", o.nbd, require, crate::tls::NBD_CREDENTIALS)];
    for m in o
        .http
        .iter()
        .flat_map(|h| h.to_socket_addrs().into_iter().flatten())
    {
        ports.push((
            "--metrics",
            m,
            false,
            "a loopback address (a cluster volume's --metrics has no credentials yet)",
        ));
    }
    crate::tls::check_ports(&ports, o.insecure).map_err(|e| anyhow!(e))
}

/// A request for the volume's figures from its HTTP endpoint.
struct ReportRequest {
    json: bool,
    reply: tokio::sync::oneshot::Sender<String>,
}

pub struct ClusterVolumeListening {
    pub nbd: SocketAddr,
    pub size_bytes: u64,
    pub object: ObjectId,
}

/// An object's id from its name: FNV-1a (64 bits) of the name's bytes.
pub fn object_id(name: &str) -> ObjectId {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    ObjectId(h)
}

struct Request {
    op: Op,
    done: Completion,
}

struct ClusterBackend {
    requests: mpsc::Sender<Request>,
    size_bytes: u64,
}

impl Backend for ClusterBackend {
    fn length_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn submit(&self, op: Op, done: Completion) {
        match op {
            // Every acknowledged write is durable on its replicas or loggers already.
            Op::Flush | Op::Trim { .. } => done.complete(Ok(None)),
            op => match self.requests.try_send(Request { op, done }) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Closed(r)) => r
                    .done
                    .complete(Err(std::io::Error::other("the cluster volume has stopped"))),
                Err(mpsc::error::TrySendError::Full(r)) => r
                    .done
                    .complete(Err(std::io::Error::other("the request queue is full"))),
            },
        }
    }
}

/// The object client on its task.
struct Driver {
    client: ObjectClient,
    net: Net,
    object: ObjectId,
    start: Instant,
    pending: HashMap<u64, Completion>,
    next_id: u64,
    /// Requests answered with an error (logged at 1, 2, 4, …).
    failed: u64,
}

impl Driver {
    /// `/status` (JSON) or `/metrics`.
    fn report(&self, json: bool, object: &str, size_bytes: u64) -> String {
        let stats = self.client.stats();
        if json {
            return serde_json::json!({
                "object": object,
                "size_bytes": size_bytes,
                "in_flight": self.pending.len(),
                "failed": self.failed,
                "client": stats,
            })
            .to_string();
        }
        let mut out = String::new();
        let mut line =
            |name: &str, help: &str, value: u64| crate::http::gauge(&mut out, name, help, value);
        line(
            "sierra_volume_requests_total",
            "Requests to the cluster.",
            stats.requests,
        );
        line(
            "sierra_volume_retries_total",
            "Pieces sent again after a refusal or a timeout.",
            stats.retries,
        );
        line(
            "sierra_volume_timeouts_total",
            "Pieces unanswered in time.",
            stats.timeouts,
        );
        line(
            "sierra_volume_failures_total",
            "Requests failed after every retry.",
            stats.failures,
        );
        line(
            "sierra_volume_in_flight",
            "NBD requests waiting for the cluster.",
            self.pending.len() as u64,
        );
        out
    }

    fn now(&self) -> u64 {
        super::nanos_since(self.start)
    }

    fn net_event(&mut self, event: NetEvent) {
        let Some(event) = self.net.handle(event) else {
            return;
        };
        let now = self.now();
        match event {
            NetEvent::Frame {
                endpoint,
                frame: Frame::Message(m),
                ..
            } => self.client.handle_message(now, endpoint, m),
            NetEvent::Closed {
                endpoint: Endpoint::Server(s),
                ..
            } => self.client.server_gone(now, s),
            _ => {}
        }
    }

    fn request(&mut self, r: Request) {
        let now = self.now();
        let id = self.next_id;
        self.next_id += 1;
        match r.op {
            Op::Read { offset, length } => {
                self.client
                    .read(now, id, self.object, offset, length as u64)
            }
            Op::Write { offset, data, .. } => self.client.write(now, id, self.object, offset, data),
            Op::WriteZeroes { offset, length, .. } => {
                self.client
                    .write(now, id, self.object, offset, vec![0; length as usize])
            }
            Op::Flush | Op::Trim { .. } => {
                r.done.complete(Ok(None));
                return;
            }
        }
        self.pending.insert(id, r.done);
    }

    /// Sends what the client wants sent, answers what it finished.
    fn pump(&mut self) -> Vec<(u64, Result<Done, ClientError>)> {
        while let Some((to, m)) = self.client.poll_message() {
            self.net.send(to, &Frame::Message(m));
        }
        let mut unclaimed = Vec::new();
        while let Some((id, result)) = self.client.poll_done() {
            match self.pending.remove(&id) {
                Some(done) => done.complete(match result {
                    Ok(Done::Read(data)) => Ok(Some(data)),
                    Ok(_) => Ok(None),
                    Err(e) => {
                        self.failed += 1;
                        if self.failed.is_power_of_two() {
                            tracing::warn!(error = %e, failed = self.failed, "a request failed");
                        }
                        Err(match e {
                            // NBD's ENOSPC: the loggers are full while replicas sleep.
                            ClientError::NoSpace => std::io::Error::from_raw_os_error(libc::ENOSPC),
                            e => std::io::Error::other(e.to_string()),
                        })
                    }
                }),
                None => unclaimed.push((id, result)),
            }
        }
        unclaimed
    }

    fn deadline(&self) -> Instant {
        self.client
            .poll_timeout()
            .map_or(Instant::now() + Duration::from_secs(3600), |t| {
                (self.start + Duration::from_nanos(t)).max(Instant::now())
            })
    }

    fn tick(&mut self) {
        let now = self.now();
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
    }

    /// Runs until request `id` (one the driver started itself) finishes.
    async fn wait_for(
        &mut self,
        id: u64,
        net_rx: &mut mpsc::Receiver<NetEvent>,
    ) -> Result<Result<Done, ClientError>> {
        loop {
            for (done_id, result) in self.pump() {
                if done_id == id {
                    return Ok(result);
                }
            }
            let deadline = self.deadline();
            tokio::select! {
                e = net_rx.recv() => match e {
                    Some(e) => self.net_event(e),
                    None => bail!("the cluster connections stopped"),
                },
                _ = tokio::time::sleep_until(deadline.into()) => {}
            }
            self.tick();
        }
    }
}

pub async fn serve(
    options: ClusterVolumeOptions,
    ready: impl FnOnce(ClusterVolumeListening),
) -> Result<()> {
    check_exposure(&options)?;
    let spec = fetch_spec(&options.mds, options.tls.as_ref()).await?;
    let object = object_id(&options.object);
    let mut addresses: HashMap<Endpoint, String> = spec
        .servers
        .iter()
        .enumerate()
        .map(|(s, a)| (Endpoint::Server(s as ServerId), a.clone()))
        .collect();
    addresses.insert(Endpoint::Mds, options.mds.clone());
    let r = super::random_u64();
    let client_id = (r as u32).min(u32::MAX - (1 << 24));
    let incarnation = (r >> 40) as u32 & 0xffff;
    let (net_tx, mut net_rx) = mpsc::channel(4096);
    let mut net = Net::new(
        spec.cluster,
        Endpoint::Client(client_id),
        incarnation as u64,
        addresses,
        net_tx,
    );
    net.set_tls(options.tls.clone());
    let mut config = ClientConfig::new(client_id);
    config.incarnation = incarnation;
    // A request waits out a failure rather than fail it: the MDS's suspicion (the heartbeat
    // timeout), a peer's wake-up from standby (10 s by the power model) and the reassignment
    // fit in the retries (delays grow to 1 s each: about 40 s in all).
    config.retries_max = 48;
    let mut d = Driver {
        client: ObjectClient::new(config),
        net,
        object,
        start: Instant::now(),
        pending: HashMap::new(),
        next_id: 1,
        failed: 0,
    };
    // The object: created if asked and missing, then its size from a first read.
    if let Some(size) = options.size {
        let now = d.now();
        d.client.create(now, 0, object, size);
        match d.wait_for(0, &mut net_rx).await? {
            Ok(_) | Err(ClientError::Exists) => {}
            Err(e) => bail!("creating object {:?}: {e}", options.object),
        }
    }
    let now = d.now();
    d.client.read(now, 0, object, 0, 512);
    match d.wait_for(0, &mut net_rx).await? {
        Ok(_) => {}
        Err(ClientError::NoSuchObject) => bail!(
            "the cluster has no object {:?}: give --size to create it",
            options.object
        ),
        Err(e) => bail!("reading object {:?}: {e}", options.object),
    }
    let size_bytes = d
        .client
        .size_of(object)
        .ok_or_else(|| anyhow!("the object's size is unknown after a read"))?;
    if let Some(size) = options.size {
        if size != size_bytes {
            bail!(
                "object {:?} exists with {size_bytes} bytes, not {size}",
                options.object
            );
        }
    }
    let (requests_tx, mut requests) = mpsc::channel::<Request>(65536);
    let backend = Arc::new(ClusterBackend {
        requests: requests_tx,
        size_bytes: size_bytes / 512 * 512,
    });
    let listener = TcpListener::bind(options.nbd)
        .await
        .with_context(|| format!("listening on {} for NBD", options.nbd))?;
    let nbd = listener.local_addr()?;
    tokio::spawn(crate::nbd_server::serve(listener, backend, options.export));
    tracing::info!(%nbd, object = %options.object, size_bytes, "cluster volume exported");
    ready(ClusterVolumeListening {
        nbd,
        size_bytes,
        object,
    });
    // The HTTP endpoint's requests (the sender is kept: the branch below never sees it closed).
    let (report_tx, mut report_rx) = mpsc::channel::<ReportRequest>(16);
    if let Some(addr) = &options.http {
        let http = crate::http::serve_reports(addr, report_tx.clone(), |json, reply| {
            ReportRequest { json, reply }
        })
        .await?;
        tracing::info!(%http, "cluster volume metrics on http://{http}/metrics");
    }
    loop {
        d.pump();
        let deadline = d.deadline();
        tokio::select! {
            r = report_rx.recv() => {
                if let Some(r) = r {
                    let _ = r.reply.send(d.report(r.json, &options.object, size_bytes));
                }
            }
            e = net_rx.recv() => match e {
                Some(e) => d.net_event(e),
                None => break,
            },
            r = requests.recv() => match r {
                Some(r) => d.request(r),
                None => break,
            },
            _ = tokio::time::sleep_until(deadline.into()) => {}
        }
        for _ in 0..256 {
            let mut any = false;
            if let Ok(e) = net_rx.try_recv() {
                d.net_event(e);
                any = true;
            }
            if let Ok(r) = requests.try_recv() {
                d.request(r);
                any = true;
            }
            if !any {
                break;
            }
        }
        d.tick();
    }
    Ok(())
}
