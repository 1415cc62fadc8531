//! `cordillera cluster server`: a chunk server — the chunk server core
//! (`cordillera_gears::server`) on real time, its chunks in one sparse file (group g's bytes at
//! g × group bytes), a link per logger (the store protocol), connections to the MDS, its peers
//! and clients (the Sierra protocol). It gets the cluster spec from the MDS. Told to enter
//! standby, it migrates its primaries away (the core), then closes every connection, stops
//! heartbeating and refuses everything but a wake request; woken, it waits the wake-up delay
//! of the power model, then serves again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use cordillera_gears::model::ServerId;
use cordillera_gears::protocol::Endpoint;
use cordillera_gears::server::{ChunkIoDone, ChunkServer, GroupPlacement, ServerStats, Slots};
use cordillera_models::power::PowerParams;
use cordillera_vstore::store::DiskDone;
use cordillera_wire::sierra::Frame;
use cordillera_wire::store::{encode as encode_store, Frame as StoreFrame};

use super::load_report::{unix_second, LoadCounter};
use super::net::{ClusterTls, Net, NetEvent};
use super::spec::ClusterSpec;
use crate::disk::{Disk, DiskError, DiskFile, IoMode};
use crate::emulate::{EmulateSpec, Emulator};
use crate::http;
use crate::power::{PowerMeter, PowerReport, PowerState};
use crate::store_link::{store_link, LinkEvent};

pub struct ServerOptions {
    pub dir: PathBuf,
    pub mds: String,
    pub id: ServerId,
    /// Must match the spec's address for this server if given.
    pub listen: Option<String>,
    /// Must match the spec's rack for this server if given.
    pub rack: Option<String>,
    pub emulate: Option<EmulateSpec>,
    pub http: Option<String>,
    pub io: IoMode,
    /// The power model (its wake-up delay is waited for on a wake request).
    pub power: PowerParams,
    /// Every link (MDS, peers, clients, loggers) inside TLS with the cluster's key.
    pub tls: Option<ClusterTls>,
    /// Listen beyond loopback without the key (`--insecure`); refused otherwise.
    pub insecure: bool,
}

pub struct ServerListening {
    pub addr: SocketAddr,
    pub http: Option<SocketAddr>,
}

enum Event {
    Logger(LinkEvent),
    Disk(Result<DiskDone, DiskError>),
    Report {
        json: bool,
        reply: oneshot::Sender<String>,
    },
}

impl From<LinkEvent> for Event {
    fn from(e: LinkEvent) -> Event {
        Event::Logger(e)
    }
}

struct Daemon {
    id: ServerId,
    spec: ClusterSpec,
    core: ChunkServer,
    net: Net,
    disk: Disk,
    /// Group g's bytes at g × group bytes of `chunks.dat` (a sparse file).
    placement: GroupPlacement,
    loggers: Vec<Option<(u64, mpsc::Sender<Vec<u8>>)>>,
    start: Instant,
    power: PowerMeter,
    /// In standby since, or waking until.
    asleep: bool,
    wake_at: Option<Instant>,
    /// Client I/O per second, for the MDS's gear scheduler.
    load: LoadCounter,
    /// The next whole second at which finished seconds go to the MDS.
    load_sent_through: u64,
    disk_in_flight: u64,
    /// Why the daemon must stop (a disk error).
    failed: Option<String>,
}

/// Asks the MDS for the cluster spec (as a client: the cluster id is not known yet).
pub async fn fetch_spec(mds: &str, tls: Option<&ClusterTls>) -> Result<ClusterSpec> {
    match super::net::ask_mds(mds, tls, &Frame::SpecRequest).await? {
        Frame::Spec(text) => ClusterSpec::parse(&text),
        Frame::Refused(why) => bail!("the MDS at {mds} refused: {why}"),
        other => bail!("unexpected answer from the MDS at {mds}: {other:?}"),
    }
}

pub async fn serve(options: ServerOptions, ready: impl FnOnce(ServerListening)) -> Result<()> {
    let spec = fetch_spec(&options.mds, options.tls.as_ref()).await?;
    let id = options.id;
    let Some(own) = spec.servers.get(id as usize).cloned() else {
        bail!(
            "the cluster has chunk servers 0 to {}, not {id}",
            spec.servers.len().saturating_sub(1)
        );
    };
    if let Some(rack) = &options.rack {
        if rack != spec.rack_of(id) {
            bail!(
                "the cluster spec puts server {id} on rack {:?}, not {rack:?}",
                spec.rack_of(id)
            );
        }
    }
    let listen = options.listen.clone().unwrap_or_else(|| own.clone());
    if listen != own {
        bail!("the cluster spec says server {id} listens on {own}, not {listen} (peers and clients dial that address)");
    }
    let config = spec.server_config(id)?;
    let group_bytes = config.group_bytes;
    std::fs::create_dir_all(&options.dir)
        .with_context(|| format!("creating {}", options.dir.display()))?;
    let path = options.dir.join("chunks.dat");
    let file = DiskFile::open(&path, true, options.io)
        .with_context(|| format!("opening {}", path.display()))?;
    if let Some(e) = &options.emulate {
        file.emulate(Emulator::start(e).map_err(|e| anyhow!(e))?);
    }
    let (tls, http) = (options.tls.is_some(), options.http.as_deref());
    super::net::check_exposure(Some(&listen), http, tls, options.insecure)?;
    let listener = TcpListener::bind(&listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let addr = listener.local_addr()?;
    let (events_tx, mut events) = mpsc::channel::<Event>(4096);
    let (net_tx, mut net_rx) = mpsc::channel::<NetEvent>(4096);
    let mut addresses: HashMap<Endpoint, String> = spec
        .servers
        .iter()
        .enumerate()
        .map(|(s, a)| (Endpoint::Server(s as ServerId), a.clone()))
        .collect();
    addresses.insert(Endpoint::Mds, options.mds.clone());
    let mut net = Net::new(
        spec.cluster,
        Endpoint::Server(id),
        super::random_u64(),
        addresses,
        net_tx,
    );
    net.set_tls(options.tls.clone());
    net.listen(listener);
    let disk_events = events_tx.clone();
    let disk = Disk::start(Arc::new(file), move |done| {
        let _ = disk_events.blocking_send(Event::Disk(done));
    });
    for (i, l) in spec.loggers.iter().enumerate() {
        let tls = options.tls.as_ref().map(|t| t.client.clone());
        tokio::spawn(store_link(i, l.addr.clone(), tls, events_tx.clone()));
    }
    let http_addr = match &options.http {
        Some(a) => Some(
            http::serve_reports(a, events_tx.clone(), |json, reply| Event::Report {
                json,
                reply,
            })
            .await?,
        ),
        None => None,
    };
    let start = Instant::now();
    let incarnation = super::random_u64();
    let core = ChunkServer::new(config, incarnation, 0);
    tracing::info!(%addr, server = id, rack = spec.rack_of(id), "chunk server listening");
    ready(ServerListening {
        addr,
        http: http_addr,
    });
    let mut d = Daemon {
        id,
        loggers: vec![None; spec.loggers.len()],
        spec,
        core,
        net,
        disk,
        placement: GroupPlacement::new(group_bytes, Slots::ByGroupId),
        start,
        power: PowerMeter::new(options.power),
        asleep: false,
        wake_at: None,
        disk_in_flight: 0,
        load: LoadCounter::default(),
        load_sent_through: unix_second(),
        failed: None,
    };
    d.pump();
    loop {
        let deadline = d.deadline();
        tokio::select! {
            event = net_rx.recv() => {
                let Some(event) = event else { break };
                d.net_event(event);
            }
            event = events.recv() => {
                let Some(event) = event else { break };
                d.event(event);
            }
            _ = tokio::time::sleep_until(deadline.into()) => {}
        }
        for _ in 0..256 {
            let mut any = false;
            if let Ok(e) = net_rx.try_recv() {
                d.net_event(e);
                any = true;
            }
            if let Ok(e) = events.try_recv() {
                d.event(e);
                any = true;
            }
            if !any {
                break;
            }
        }
        if let Some(why) = d.failed.take() {
            tracing::error!(server = d.id, device = %path.display(), "{why}: stopping");
            bail!("chunk server {}: {why} on {}", d.id, path.display());
        }
        d.tick();
        d.pump();
    }
    Ok(())
}

impl Daemon {
    fn now(&self) -> u64 {
        super::nanos_since(self.start)
    }

    fn deadline(&self) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        if let Some(w) = self.wake_at {
            return w;
        }
        if self.asleep {
            return far;
        }
        // Finished seconds of load go to the MDS within a second.
        let report = Instant::now() + Duration::from_secs(1);
        self.core
            .poll_timeout()
            .map_or(far, |t| self.start + Duration::from_nanos(t))
            .min(report)
            .max(Instant::now())
    }

    fn tick(&mut self) {
        if let Some(w) = self.wake_at {
            if Instant::now() >= w {
                self.wake_at = None;
                self.asleep = false;
                self.net.set_standby(false);
                self.power.set(PowerState::Up);
                tracing::info!(server = self.id, "awake");
                let now = self.now();
                self.core.handle_wake(now);
            }
            return;
        }
        if self.asleep {
            return;
        }
        let second = unix_second();
        if second > self.load_sent_through {
            for frame in self.load.take_finished(second) {
                self.net.send(Endpoint::Mds, &frame);
            }
            self.load_sent_through = second;
        }
        let now = self.now();
        if self.core.poll_timeout().is_some_and(|t| t <= now) {
            self.core.handle_timeout(now);
        }
    }

    fn net_event(&mut self, event: NetEvent) {
        let Some(event) = self.net.handle(event) else {
            return;
        };
        let now = self.now();
        match event {
            NetEvent::Wake if self.asleep && self.wake_at.is_none() => {
                let delay = Duration::from_nanos(self.power.params().wake_from_standby_ns);
                tracing::info!(server = self.id, ?delay, "woken: powering up");
                self.power.set(PowerState::Waking);
                self.wake_at = Some(Instant::now() + delay);
            }
            NetEvent::Frame {
                endpoint,
                frame: Frame::Message(m),
                ..
            } if !self.asleep => {
                if matches!(endpoint, Endpoint::Client(_)) {
                    self.load.observe(unix_second(), &m);
                }
                self.core.handle_message(now, endpoint, m)
            }
            _ => {}
        }
    }

    fn event(&mut self, event: Event) {
        let now = self.now();
        match event {
            Event::Disk(Ok(done)) => {
                self.disk_in_flight -= 1;
                self.power.busy(self.disk_in_flight > 0);
                self.core.handle_io(now, ChunkIoDone::from(done));
            }
            // A chunk the disk cannot keep: stop before acknowledging anything more.
            Event::Disk(Err(e)) => {
                self.failed = Some(format!("disk {} failed: {}", e.op, e.error));
            }
            Event::Logger(LinkEvent::Up {
                store,
                link,
                sender,
            }) => self.loggers[store] = Some((link, sender)),
            Event::Logger(LinkEvent::Down { store, link }) => {
                if self.loggers[store]
                    .as_ref()
                    .is_some_and(|(l, _)| *l == link)
                {
                    self.loggers[store] = None;
                    tracing::warn!(server = self.id, logger = store, "logger disconnected");
                    self.core.logger_lost(now, store as u64);
                }
            }
            Event::Logger(LinkEvent::Frame { store, link, frame }) => {
                if self.loggers[store].as_ref().is_none_or(|(l, _)| *l != link) {
                    return;
                }
                if let StoreFrame::Reply { id, load, reply } = frame {
                    let load = Some(load.queue_length as u64);
                    self.core.handle_store(now, id, reply, load);
                }
            }
            Event::Logger(LinkEvent::Unreachable { .. }) => {}
            Event::Report { json, reply } => {
                let _ = reply.send(if json {
                    self.status_json()
                } else {
                    self.metrics()
                });
            }
        }
    }

    fn pump(&mut self) {
        loop {
            let mut progress = false;
            let now = self.now();
            while let Some((to, m)) = self.core.poll_message() {
                progress = true;
                self.net.send(to, &Frame::Message(m));
            }
            let mut lost = Vec::new();
            while let Some((logger, id, request)) = self.core.poll_store() {
                progress = true;
                let mut bytes = Vec::new();
                encode_store(&StoreFrame::Request { id, request }, &mut bytes);
                let sent = self
                    .loggers
                    .get(logger as usize)
                    .and_then(|l| l.as_ref())
                    .is_some_and(|(_, s)| s.try_send(bytes).is_ok());
                if !sent && !lost.contains(&logger) {
                    lost.push(logger);
                }
            }
            for logger in lost {
                self.core.logger_lost(now, logger);
            }
            let mut ops = Vec::new();
            while let Some(io) = self.core.poll_io() {
                progress = true;
                ops.push(self.placement.disk_op(io));
            }
            if !ops.is_empty() {
                self.disk_in_flight += ops.len() as u64;
                self.power.busy(true);
                for op in ops {
                    self.disk.submit(op);
                }
            }
            if !self.asleep && self.core.wants_sleep() {
                tracing::info!(server = self.id, "entering standby");
                self.asleep = true;
                self.net.close_all();
                self.net.set_standby(true);
                self.power.set(PowerState::Standby);
            }
            if !progress {
                return;
            }
        }
    }

    fn report(&mut self) -> ServerReport {
        ServerReport {
            server: self.id,
            rack: self.spec.rack_of(self.id).to_string(),
            power: self.power.report(),
            primaries: self.core.primaries().count(),
            logged_bytes: self.core.logged_bytes(),
            at_risk_bytes: self.core.at_risk_bytes(),
            stats: self.core.stats(),
            loggers_connected: self.loggers.iter().filter(|l| l.is_some()).count(),
            disk_in_flight: self.disk_in_flight,
            frames_sent: self.net.stats.frames_sent,
            frames_dropped: self.net.stats.frames_dropped,
        }
    }

    fn status_json(&mut self) -> String {
        serde_json::to_string_pretty(&self.report()).expect("a report serializes")
    }

    fn metrics(&mut self) -> String {
        let r = self.report();
        let mut out = String::new();
        let mut line =
            |name: &str, help: &str, value: String| http::gauge(&mut out, name, help, value);
        line(
            "sierra_server_standby",
            "1 in standby or waking.",
            ((r.power.state != PowerState::Up) as u8).to_string(),
        );
        line(
            "sierra_server_energy_joules",
            "Energy by the power model.",
            format!("{:.1}", r.power.energy_j),
        );
        line(
            "sierra_server_standby_seconds",
            "Time in standby.",
            format!("{:.3}", r.power.standby_s),
        );
        line(
            "sierra_server_primaries",
            "Chunk groups this server is primary of.",
            r.primaries.to_string(),
        );
        line(
            "sierra_server_logged_bytes",
            "Bytes of its groups held on loggers.",
            r.logged_bytes.to_string(),
        );
        line(
            "sierra_server_at_risk_bytes",
            "Logged bytes with fewer copies on live loggers than replicas (reclaimed first).",
            r.at_risk_bytes.to_string(),
        );
        line(
            "sierra_server_reclaimed_bytes_total",
            "Bytes reclaimed from loggers.",
            r.stats.reclaimed_bytes.to_string(),
        );
        line(
            "sierra_server_reads_total",
            "Client reads served.",
            r.stats.reads.to_string(),
        );
        line(
            "sierra_server_writes_total",
            "Client writes served.",
            r.stats.writes.to_string(),
        );
        line(
            "sierra_server_refused_total",
            "Client requests refused (clients retry).",
            r.stats.refused.to_string(),
        );
        out
    }
}

#[derive(Serialize)]
struct ServerReport {
    server: ServerId,
    rack: String,
    power: PowerReport,
    primaries: usize,
    logged_bytes: u64,
    /// Of `logged_bytes`, those with fewer copies on loggers that are up than replicas.
    at_risk_bytes: u64,
    stats: ServerStats,
    loggers_connected: usize,
    disk_in_flight: u64,
    frames_sent: u64,
    frames_dropped: u64,
}
