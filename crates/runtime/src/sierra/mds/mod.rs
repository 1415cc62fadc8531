//! `cordillera cluster mds`: the MDS core (`cordillera_gears::mds`) on real time and TCP, its
//! state in `DIR/mds.redb` (each step committed before its messages leave) or, with `--etcd`,
//! in etcd with several MDS processes taking turns (`mds_etcd`, `mds_leader`: one active, the
//! others standing by); the gears — the spec's plan, or learned by the gear scheduler
//! (`cordillera_gears::learned`) from the load the chunk servers report every second, its
//! hours kept with the state — with hours of `hour_seconds` and days rotating the gear groups,
//! gears set by hand, wake requests to servers in standby, `/metrics` and `/status`
//! (`report`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use cordillera_gears::learned::Scheduler;
use cordillera_gears::mds::{Mds, ServerState};
use cordillera_gears::model::ServerId;
use cordillera_gears::protocol::Endpoint;
use cordillera_gears::schedule::rotation;
use cordillera_wire::sierra::Frame;

use super::mds_etcd::{EtcdState, NotLeader, Unavailable};
use super::mds_leader::{Leadership, Standing};
use super::mds_state::State;
use super::mds_store::MdsStore;
use super::net::{Net, NetEvent};
use super::spec::{ClusterSpec, Schedule};
use crate::etcd::Etcd;

mod report;
use crate::http;

pub struct MdsOptions {
    pub dir: PathBuf,
    /// Required at the first start; afterwards it must equal the stored one if given.
    pub spec: Option<ClusterSpec>,
    /// Where to listen (default: the spec's MDS address).
    pub listen: Option<String>,
    /// Where to serve `/metrics` and `/status`.
    pub http: Option<String>,
    /// Keep the state in etcd and take turns with other MDS processes (one active).
    pub etcd: Option<EtcdOptions>,
    /// Every link inside TLS with the cluster's key.
    pub tls: Option<super::net::ClusterTls>,
    /// Listen beyond loopback without the key (`--insecure`); refused otherwise.
    pub insecure: bool,
}

/// `cluster mds --etcd`: where the state is kept and how leadership is held.
#[derive(Clone, Debug)]
pub struct EtcdOptions {
    /// etcd's client endpoints (`host:port`), every member's.
    pub endpoints: Vec<String>,
    /// The keys' prefix (default `/cordillera/CLUSTER/`, the cluster id in hex).
    pub prefix: Option<String>,
    /// The leader's lease: a standby takes over this long after the leader stops renewing.
    pub lease_s: u64,
}

pub struct MdsListening {
    pub addr: SocketAddr,
    pub http: Option<SocketAddr>,
}

/// How often a wake request is repeated while the server has not come back.
const WAKE_REPEAT: Duration = Duration::from_secs(2);

/// A second of load is closed this long after it ends (the chunk servers send theirs within
/// about a second); a report later than that is counted as late and dropped.
const LOAD_GRACE_S: u64 = 3;

/// Measured hours `/status` lists (the most recent: a week).
const HOURS_SHOWN: usize = 24 * 7;

enum Control {
    Report {
        json: bool,
        reply: oneshot::Sender<String>,
    },
}

/// The gear: the plan's for this hour, unless set by hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
struct Gear {
    gear: usize,
    day: i64,
    hour: u64,
    by_hand: bool,
}

struct Daemon<'a> {
    spec: ClusterSpec,
    mds: Mds,
    store: State,
    /// With etcd: acting only while it holds.
    leadership: Option<&'a Leadership>,
    /// Changes etcd could not take yet, and the steps they span.
    unstored: Option<cordillera_gears::mds::persist::Changes>,
    held_steps: u64,
    net: Net,
    start: Instant,
    by_hand: Option<usize>,
    applied: Option<(usize, i64)>,
    /// Servers being woken, with when the request was last sent.
    waking: HashMap<ServerId, Instant>,
    gear_changes: u64,
    shifts: std::collections::VecDeque<Shift>,
    /// The gear scheduler: measures the load always, plans the gears when the spec says
    /// `"schedule": "learned"`.
    scheduler: Scheduler,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How many gear shifts `/status` lists (the most recent).
const SHIFTS_KEPT: usize = 64;

/// A gear shift and how its migrations went (the paper's Table 3).
#[derive(Clone, Debug, Serialize)]
struct ShiftReport {
    /// Seconds since the MDS started.
    at_s: f64,
    from: Option<usize>,
    to: usize,
    by_hand: bool,
    /// Primary migrations from the shift until it settled (or until now).
    migrations: u64,
    /// From the shift until no primary was being released and no server releasing or waking
    /// (an up-shift's includes the wake-up delay); `None` while not settled.
    settled_ms: Option<f64>,
}

struct Shift {
    at: Instant,
    migrations_before: u64,
    report: ShiftReport,
}

/// Serves until the process is stopped; `ready` once it listens.
pub async fn serve(options: MdsOptions, mut ready: impl FnMut(MdsListening)) -> Result<()> {
    let (control_tx, mut control_rx) = mpsc::channel(64);
    super::net::check_exposure(None, options.http.as_deref(), false, options.insecure)?;
    let http = match &options.http {
        Some(a) => Some(
            http::serve_reports(a, control_tx, |json, reply| Control::Report { json, reply })
                .await?,
        ),
        None => None,
    };
    let Some(etcd) = options.etcd.clone() else {
        let mut store = State::Redb(MdsStore::open(&options.dir)?);
        let spec = resolve_spec(
            &mut store,
            options.spec.clone(),
            &options.dir.display().to_string(),
        )?;
        // The term grows with every start: chunk servers and clients refuse an MDS of an
        // older term than one they have seen.
        let term = match store.meta("term")? {
            Some(b) => u64::from_le_bytes(
                b.as_slice()
                    .try_into()
                    .map_err(|_| anyhow!("MDS state: the term is not 8 bytes"))?,
            ),
            None => 0,
        } + 1;
        store.set_meta("term", Some(&term.to_le_bytes()))?;
        let serving = Serving {
            options: &options,
            leadership: None,
            http,
            incarnation: term,
        };
        return run(store, spec, serving, &mut control_rx, &mut ready).await;
    };
    if options.listen.is_none() {
        bail!("--etcd needs --listen: this MDS's own address (one of the spec's MDS addresses)");
    }
    let name = format!(
        "{}#{:016x}",
        options.listen.as_deref().unwrap_or("mds"),
        super::random_u64()
    );
    loop {
        let (endpoints, name_c) = (etcd.endpoints.clone(), name.clone());
        let spec_given = options.spec.clone();
        let prefix_given = etcd.prefix.clone();
        let lease_s = etcd.lease_s;
        // Blocking calls (etcd over HTTP) off the runtime's threads.
        let campaign = tokio::task::spawn_blocking(move || -> Result<_> {
            let prefix = match (&prefix_given, &spec_given) {
                (Some(p), _) => p.clone(),
                (None, Some(spec)) => default_prefix(spec.cluster),
                (None, None) => {
                    bail!("--etcd needs --etcd-prefix or --spec (to name the cluster's keys)")
                }
            };
            let stop = std::sync::atomic::AtomicBool::new(false);
            let leadership = Leadership::campaign(
                &endpoints,
                prefix.as_bytes(),
                &name_c,
                lease_s,
                |leader| match leader {
                    Some(l) => tracing::info!(leader = l, "standing by"),
                    None => tracing::info!("standing by: no leader"),
                },
                &stop,
            )?;
            tracing::info!(term = leadership.revision, "elected MDS leader");
            // A write that takes longer than half the lease is one the lease may not cover.
            let timeout = Duration::from_millis(lease_s * 500).max(Duration::from_secs(1));
            let client = Etcd::new(&endpoints, timeout)?;
            let state = EtcdState::open(client, prefix.as_bytes(), leadership.revision)?;
            Ok((leadership, state, prefix))
        });
        let (leadership, state, prefix) = standing_by(campaign, &mut control_rx)
            .await
            .context("the campaign for MDS leadership")??;
        let mut store = State::Etcd(state);
        let spec = match tokio::task::block_in_place(|| {
            resolve_spec(&mut store, options.spec.clone(), &format!("etcd {prefix}"))
        }) {
            Ok(spec) => spec,
            Err(e) if e.is::<NotLeader>() || e.is::<Unavailable>() => {
                tracing::warn!(error = %e, "lost the leadership before serving");
                continue;
            }
            Err(e) => return Err(e),
        };
        let serving = Serving {
            options: &options,
            leadership: Some(&leadership),
            http,
            incarnation: leadership.revision as u64,
        };
        let outcome = run(store, spec, serving, &mut control_rx, &mut ready).await;
        match outcome {
            Err(e) if e.is::<NotLeader>() => {
                tracing::warn!(error = %e, "stepping down: standing by again");
                tokio::task::spawn_blocking(move || leadership.resign())
                    .await
                    .ok();
            }
            other => {
                tokio::task::spawn_blocking(move || leadership.resign())
                    .await
                    .ok();
                return other;
            }
        }
    }
}

/// Waits for `campaign`, answering `/status` and `/metrics` meanwhile (standing by).
async fn standing_by<T>(
    campaign: tokio::task::JoinHandle<T>,
    control: &mut mpsc::Receiver<Control>,
) -> Result<T, tokio::task::JoinError> {
    tokio::pin!(campaign);
    loop {
        tokio::select! {
            done = &mut campaign => return done,
            Some(Control::Report { json, reply }) = control.recv() => {
                let _ = reply.send(if json {
                    "{\"role\":\"standby\"}\n".to_string()
                } else {
                    let mut out = String::new();
                    http::gauge(&mut out, "cordillera_mds_leader", "1 while this MDS is the active one", 0);
                    out
                });
            }
        }
    }
}

/// How this MDS serves: its options, its leadership (with etcd), its HTTP address, and the
/// incarnation its hellos carry (with etcd, the leadership's term).
struct Serving<'a> {
    options: &'a MdsOptions,
    leadership: Option<&'a Leadership>,
    http: Option<SocketAddr>,
    incarnation: u64,
}

/// The keys of a cluster's MDS in etcd unless `--etcd-prefix` says otherwise.
pub fn default_prefix(cluster: u64) -> String {
    format!("/cordillera/{cluster:016x}/")
}

/// The cluster spec: the stored one, or the given one at the first start (then stored).
fn resolve_spec(store: &mut State, given: Option<ClusterSpec>, place: &str) -> Result<ClusterSpec> {
    Ok(match (store.meta("spec")?, given) {
        (None, None) => bail!(
            "{place} holds no cluster: give the cluster spec (--spec FILE) at the first start"
        ),
        (None, Some(spec)) => {
            store.set_meta("spec", Some(spec.to_json().as_bytes()))?;
            spec
        }
        (Some(stored), given) => {
            let stored = ClusterSpec::parse(&stored).context("the stored cluster spec")?;
            if given.as_ref().is_some_and(|g| *g != stored) {
                bail!(
                    "the cluster spec given differs from the one stored in {place}; start without --spec to use the stored one"
                );
            }
            stored
        }
    })
}

/// Serves as the MDS on `store` until the daemon stops, fails, or (with etcd) is no longer the
/// leader ([`NotLeader`]).
async fn run(
    mut store: State,
    spec: ClusterSpec,
    serving: Serving<'_>,
    control_rx: &mut mpsc::Receiver<Control>,
    ready: &mut impl FnMut(MdsListening),
) -> Result<()> {
    let options = serving.options;
    let layout = spec.layout()?;
    let config = spec.mds_config()?;
    let start = Instant::now();
    let mut mds = match store.snapshot()? {
        Some(snapshot) => {
            let mds = Mds::restore(config, &layout, snapshot, 0)
                .context("the MDS's stored state does not fit the cluster")?;
            tracing::info!(groups = mds.group_count(), "MDS state restored");
            mds
        }
        None => Mds::new(config, &layout, 0),
    };
    store.store(&mds.take_changes())?;
    let by_hand = match store.meta("gear")? {
        Some(v) if v.len() == 1 && (1..=spec.replicas).contains(&(v[0] as usize)) => {
            Some(v[0] as usize)
        }
        Some(_) => bail!("MDS state: the stored gear is not 1..={}", spec.replicas),
        None => None,
    };
    let mut scheduler = Scheduler::new(
        spec.gear_policy()?,
        spec.server_performance,
        spec.hour_seconds,
    );
    let hours = store.load_hours()?;
    if !hours.is_empty() {
        tracing::info!(hours = hours.len(), "measured load restored");
    }
    scheduler.restore(hours);
    let listen = options.listen.clone().unwrap_or_else(|| spec.mds.clone());
    super::net::check_exposure(Some(&listen), None, options.tls.is_some(), options.insecure)?;
    let listener = TcpListener::bind(&listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let addr = listener.local_addr()?;
    let (net_tx, mut net_rx) = mpsc::channel(4096);
    let addresses = spec
        .servers
        .iter()
        .enumerate()
        .map(|(s, a)| (Endpoint::Server(s as ServerId), a.clone()))
        .collect();
    let mut net = Net::new(
        spec.cluster,
        Endpoint::Mds,
        serving.incarnation,
        addresses,
        net_tx,
    );
    net.set_tls(options.tls.clone());
    net.listen(listener);
    tracing::info!(%addr, cluster = spec.cluster, servers = spec.servers.len(), "MDS listening");
    ready(MdsListening {
        addr,
        http: serving.http,
    });
    let mut d = Daemon {
        spec,
        mds,
        store,
        leadership: serving.leadership,
        unstored: None,
        held_steps: 0,
        net,
        start,
        by_hand,
        applied: None,
        waking: HashMap::new(),
        gear_changes: 0,
        shifts: std::collections::VecDeque::new(),
        scheduler,
    };
    d.shift_gear();
    d.flush()?;
    loop {
        let deadline = d.deadline();
        tokio::select! {
            event = net_rx.recv() => {
                let Some(event) = event else { break };
                d.net_event(event);
                // Whatever else has arrived goes in the same commit.
                for _ in 0..256 {
                    match net_rx.try_recv() {
                        Ok(event) => d.net_event(event),
                        Err(_) => break,
                    }
                }
            }
            control = control_rx.recv() => {
                if let Some(Control::Report { json, reply }) = control {
                    let _ = reply.send(if json { d.status_json() } else { d.metrics() });
                }
            }
            _ = tokio::time::sleep_until(deadline.into()) => {}
        }
        let now = d.now();
        if d.mds.poll_timeout().is_some_and(|t| t <= now) {
            d.mds.handle_timeout(now);
        }
        d.measure();
        d.shift_gear();
        d.flush()?;
        d.follow_shift();
    }
    Ok(())
}

impl Daemon<'_> {
    /// With etcd, whether its lease keeper finds it unavailable (no quorum, unreachable).
    fn etcd_down(&self) -> bool {
        self.leadership.is_some_and(|l| !l.etcd_available())
    }

    fn now(&self) -> u64 {
        super::nanos_since(self.start)
    }

    fn deadline(&self) -> Instant {
        let core = self
            .mds
            .poll_timeout()
            .map(|t| self.start + Duration::from_nanos(t));
        // The next moment the plan may change (an hour, or an up-shift's lead before one).
        let next_hour =
            Instant::now() + Duration::from_millis(self.spec.next_plan_change_ms(self.clock_ms()));
        let wake = self.waking.values().map(|&t| t + WAKE_REPEAT).min();
        // Seconds of load close every second.
        let measure = Some(Instant::now() + Duration::from_secs(1));
        [core, Some(next_hour), wake, measure]
            .into_iter()
            .flatten()
            .min()
            .expect("an hour")
            .max(Instant::now())
    }

    fn net_event(&mut self, event: NetEvent) {
        let Some(event) = self.net.handle(event) else {
            return;
        };
        let NetEvent::Frame {
            endpoint, frame, ..
        } = event
        else {
            return;
        };
        let now = self.now();
        match frame {
            Frame::Message(m) => self.mds.handle_message(now, endpoint, m),
            Frame::Load(seconds) => {
                if matches!(endpoint, Endpoint::Server(_)) {
                    let offset = self.spec.day_offset_s;
                    for (second, counts) in &seconds {
                        self.scheduler.report(second + offset, counts);
                    }
                }
            }
            Frame::SpecRequest => {
                let spec = self.spec.to_json().into_bytes();
                self.net.send(endpoint, &Frame::Spec(spec));
            }
            Frame::Gear(g) => {
                let g = g as usize;
                let value = (1..=self.spec.replicas).contains(&g).then_some(g);
                if g != 0 && value.is_none() {
                    let why = format!("gear {g} is outside 1..={}", self.spec.replicas);
                    self.net.send(endpoint, &Frame::Refused(why));
                    return;
                }
                let stored = value.map(|g| [g as u8]);
                if self.etcd_down() {
                    let why = "etcd is unavailable: the MDS changes nothing until it answers";
                    self.net.send(endpoint, &Frame::Refused(why.into()));
                    return;
                }
                if let Err(e) = self.store.set_meta("gear", stored.as_ref().map(|b| &b[..])) {
                    tracing::error!(error = %e, "could not store the gear set by hand");
                    self.net
                        .send(endpoint, &Frame::Refused(format!("not stored: {e}")));
                    return;
                }
                tracing::info!(gear = ?value, "gear set by hand (none: the plan)");
                self.by_hand = value;
                self.shift_gear();
                let gear = self.gear();
                self.net.send(endpoint, &Frame::Gear(gear.gear as u8));
            }
            _ => {}
        }
    }

    /// The plan's clock: Unix time shifted by the spec's `day_offset_s`, milliseconds.
    fn clock_ms(&self) -> u64 {
        unix_ms() + self.spec.day_offset_s * 1000
    }

    /// Closes the seconds of load whose reports are in, and keeps the hours that ended.
    fn measure(&mut self) {
        let now_s = self.clock_ms() / 1000;
        let ended = self
            .scheduler
            .close_before(now_s.saturating_sub(LOAD_GRACE_S));
        for h in &ended {
            tracing::info!(
                hour = h.hour,
                peak = h.peak,
                mean = h.mean,
                covered_s = h.covered_s,
                "hour of load measured"
            );
        }
        // Not the cluster's state: an hour lost to a failed commit is an hour not learned.
        if !ended.is_empty() && self.etcd_down() {
            tracing::warn!(
                hours = ended.len(),
                "etcd unavailable: measured hours not kept"
            );
            return;
        }
        if let Err(e) = self.store.store_load_hours(&ended) {
            tracing::error!(error = %e, "could not keep the measured hours");
        }
    }

    /// The schedule's gear at `unix_ms`: the spec's plan, or the learned one.
    fn planned_at(&self, unix_ms: u64) -> (u64, usize) {
        match self.spec.schedule {
            Schedule::Plan => self.spec.plan_at(unix_ms),
            Schedule::Learned => self
                .spec
                .gear_at(unix_ms, |hour| self.scheduler.gear(hour as i64)),
        }
    }

    fn gear(&self) -> Gear {
        let (hour_index, planned) = self.planned_at(self.clock_ms());
        let hour = hour_index % 24;
        let day = (hour_index / 24) as i64;
        let (gear, by_hand) = match self.by_hand {
            Some(g) => (g, true),
            None => (planned, false),
        };
        Gear {
            gear,
            day,
            hour,
            by_hand,
        }
    }

    fn shift_gear(&mut self) {
        let g = self.gear();
        if self.applied != Some((g.gear, g.day)) {
            let now = self.now();
            tracing::info!(
                gear = g.gear,
                day = g.day,
                hour = g.hour,
                by_hand = g.by_hand,
                "gear"
            );
            self.mds
                .set_gear(now, g.gear, &rotation(g.day, self.spec.replicas));
            if self.shifts.len() == SHIFTS_KEPT {
                self.shifts.pop_front();
            }
            self.shifts.push_back(Shift {
                at: Instant::now(),
                migrations_before: self.mds.stats().migrations,
                report: ShiftReport {
                    at_s: self.start.elapsed().as_secs_f64(),
                    from: self.applied.map(|(g, _)| g),
                    to: g.gear,
                    by_hand: g.by_hand,
                    migrations: 0,
                    settled_ms: None,
                },
            });
            self.applied = Some((g.gear, g.day));
            self.gear_changes += 1;
        }
    }

    /// Brings the latest shift's migrations up to date, and marks it settled once the core
    /// says so.
    fn follow_shift(&mut self) {
        let migrations = self.mds.stats().migrations;
        let settled = self.mds.shift_settled();
        if let Some(shift) = self.shifts.back_mut() {
            if shift.report.settled_ms.is_none() {
                shift.report.migrations = migrations - shift.migrations_before;
                if settled {
                    shift.report.settled_ms = Some(shift.at.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
    }

    /// Commits the step's changes, then sends its messages and wake requests. With etcd, a
    /// leader that no longer holds its lease sends nothing ([`NotLeader`]); while etcd cannot
    /// take a step's changes, they wait for it, and no message leaves — of that step or any
    /// after it, which may rest on them (Sierra's messages tolerate loss: the cores repeat
    /// them) — so the cluster goes on as it is, changing nothing, until etcd answers.
    fn flush(&mut self) -> Result<()> {
        let mut changes = self.mds.take_changes();
        if let Some(mut earlier) = self.unstored.take() {
            earlier.groups.append(&mut changes.groups);
            earlier.objects.append(&mut changes.objects);
            earlier.chunks.append(&mut changes.chunks);
            earlier.servers.append(&mut changes.servers);
            earlier.rng = changes.rng.or(earlier.rng);
            changes = earlier;
        }
        let standing = self.leadership.map(Leadership::standing);
        if standing == Some(Standing::Lost) {
            return Err(anyhow!(NotLeader));
        }
        // Unsure of its lease, the leader acts on nothing; while the lease keeper finds etcd
        // unavailable, a write would only wait out its timeouts: the changes wait untried.
        let stored = if standing == Some(Standing::Unsure) {
            Err(anyhow!(Unavailable(
                "the MDS's lease is not confirmed yet".into()
            )))
        } else if self.etcd_down() && !changes.is_empty() {
            Err(anyhow!(Unavailable(
                "the MDS's lease renewals get no answer".into()
            )))
        } else {
            self.store.store(&changes)
        };
        match stored {
            Ok(()) => {
                if self.held_steps > 0 {
                    tracing::info!(steps = self.held_steps, "etcd took the steps that waited");
                    self.held_steps = 0;
                }
            }
            Err(e) if e.is::<Unavailable>() => {
                if self.held_steps == 0 {
                    tracing::warn!(error = %e, "etcd cannot take the MDS's changes: holding them, sending nothing");
                }
                self.held_steps += 1;
                self.unstored = Some(changes);
                while self.mds.poll_message().is_some() {}
                while self.mds.poll_wake().is_some() {}
                return Ok(());
            }
            Err(e) => return Err(e.context(
                "storing the MDS's state (the MDS stops: it cannot act on state it did not keep)",
            )),
        }
        while let Some((to, m)) = self.mds.poll_message() {
            self.net.send(to, &Frame::Message(m));
        }
        let now = Instant::now();
        while let Some(s) = self.mds.poll_wake() {
            self.waking.insert(s, now - WAKE_REPEAT);
        }
        let states: Vec<(ServerId, ServerState)> = self
            .waking
            .keys()
            .map(|&s| (s, self.mds.server_state(s)))
            .collect();
        for (s, state) in states {
            if !matches!(state, ServerState::Waking | ServerState::Suspect) {
                self.waking.remove(&s);
                continue;
            }
            if self.waking[&s] + WAKE_REPEAT <= now {
                self.waking.insert(s, now);
                self.net.send(Endpoint::Server(s), &Frame::Wake);
            }
        }
        Ok(())
    }
}
