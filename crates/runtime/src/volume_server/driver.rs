//! The driver: the one task that owns the off-loading client, the cache and the base volume,
//! and carries NBD requests, store replies and disk completions to and from them.

use super::*;

impl Core {
    pub(super) async fn run(
        mut self,
        config: Config,
        inboxes: Inboxes,
        started: Instant,
        ready: oneshot::Sender<Result<(), String>>,
        formatting: bool,
    ) -> Result<()> {
        let Inboxes {
            events: mut inbox,
            requests: mut request_inbox,
        } = inboxes;
        let now = || started.elapsed().as_nanos() as u64;
        // Give the stores a moment to be reached, so that recovery asks them all at once.
        let grace = tokio::time::sleep(CONNECT_GRACE);
        tokio::pin!(grace);
        let mut early = Vec::new();
        let mut refused = vec![false; self.links.len()];
        while (0..self.links.len()).any(|s| self.links[s].is_none() && !refused[s]) {
            tokio::select! {
                event = inbox.recv() => match event {
                    Some(e @ Event::StoreUp { .. }) | Some(e @ Event::StoreDown { .. }) => self.link_event(e),
                    Some(Event::StoreUnreachable { store }) => refused[store] = true,
                    Some(other) => early.push(other),
                    None => return Ok(()),
                },
                _ = &mut grace => break,
            }
        }
        let mut client = if formatting {
            let stores = (0..self.label.stores.len())
                .map(|i| StoreInfo {
                    id: i as u64 + 1,
                    server: i as u64 + 1,
                })
                .collect();
            Client::format(config, stores, now())
        } else {
            Client::recover(config, now())
        };
        let mut ready = Some(ready);
        for e in early {
            self.handle(&mut client, e, now())?;
        }
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        // Logged on change, checked once a second: whether data is off-loaded.
        let mut offloading = false;
        // While recovering: what the client waits for, logged on change and every 10 s.
        let mut waiting: Option<(RecoveryWait, Instant)> = None;
        loop {
            self.volume
                .set_preloading(client.is_ready() && self.stopping.is_none());
            self.drive(&mut client, &now);
            if ready.is_none() && matches!(client.failure(), Some(ClientError::Fenced)) {
                // Requests in flight were answered with EIO by the core.
                return Err(anyhow::anyhow!(
                    "fenced: another process serving this volume recovered from its stores; this one stops"
                ));
            }
            if self.stopping.is_some() && self.volume.in_flight() == 0 {
                let closed = match (self.volume.cache_mut(), self.cache_log.as_mut()) {
                    (Some(c), Some(l)) => l.close(c).map_err(|e| format!("{e:#}")),
                    _ => Ok(()),
                };
                let _ = self.stopping.take().expect("some").send(closed);
                return Ok(());
            }
            if ready.is_some() {
                if client.is_ready() {
                    self.check_store_ids(&client)?;
                    let stats = client.stats();
                    let missing: Vec<u64> = client
                        .stores()
                        .into_iter()
                        .filter(|(_, _, up)| !up)
                        .map(|(_, info, _)| info.id)
                        .collect();
                    tracing::info!(
                        offloaded_bytes = stats.offloaded_bytes,
                        stores_up = self.links.iter().filter(|l| l.is_some()).count(),
                        ?missing,
                        "soft state rebuilt from the stores"
                    );
                    if !missing.is_empty() {
                        tracing::warn!(
                            ?missing,
                            "serving without stores that did not answer: they count as failed, and what they hold is deleted when they return"
                        );
                    }
                    let _ = ready.take().expect("some").send(Ok(()));
                } else if let Some(e) = client.failure() {
                    let message = match e {
                        ClientError::NoStoreSet(e) => format!("{e}"),
                        other => format!("{other}"),
                    };
                    let _ = ready.take().expect("some").send(Err(message));
                    return Ok(());
                }
            }
            let timeout = client
                .poll_timeout()
                .map(|t| started + Duration::from_nanos(t));
            tokio::select! {
                event = inbox.recv() => {
                    let Some(event) = event else { return Ok(()) };
                    self.handle(&mut client, event, now())?;
                    self.handle_waiting(&mut client, &mut inbox, &mut request_inbox, &now)?;
                }
                Some(Upward { op, reply }) = request_inbox.recv() => {
                    self.upward(&mut client, op, reply, now());
                    self.handle_waiting(&mut client, &mut inbox, &mut request_inbox, &now)?;
                }
                _ = async { tokio::time::sleep_until(timeout.expect("guarded").into()).await }, if timeout.is_some() => {
                    client.handle_timeout(now());
                }
                _ = tick.tick() => {
                    self.each_second(&client, started, &mut waiting, &mut offloading);
                }
            }
        }
    }

    /// Once a second: while recovering, what the client waits for (on change and every 10 s);
    /// the cache's tick and its log's collection; a reclaim sample; a line when data starts or
    /// stops being off-loaded.
    fn each_second(
        &mut self,
        client: &Client,
        started: Instant,
        waiting: &mut Option<(RecoveryWait, Instant)>,
        offloading: &mut bool,
    ) {
        if let Some(w) = client.recovery_wait() {
            let due = waiting
                .as_ref()
                .is_none_or(|(last, at)| *last != w || at.elapsed() >= Duration::from_secs(10));
            if due && started.elapsed() >= Duration::from_secs(1) {
                if waits_for_every_store(&w, client.config().n_way) {
                    tracing::warn!(
                        answered = w.answered,
                        stores = w.stores,
                        needed = w.needed,
                        failed = ?w.failed,
                        silent = ?w.silent,
                        "recovering: waiting for every store: the superblock is marked degraded (a write was acknowledged with fewer than N copies before the restart), so no store may be missing"
                    );
                } else {
                    tracing::warn!(
                        answered = w.answered,
                        stores = w.stores,
                        needed = w.needed,
                        failed = ?w.failed,
                        silent = ?w.silent,
                        "recovering: waiting for stores (serving needs every store, or all but N-1 once the others have failed)"
                    );
                }
                *waiting = Some((w, Instant::now()));
            }
        }
        if let (Some(c), Some(l)) = (self.volume.cache_mut(), self.cache_log.as_mut()) {
            c.handle_tick(l.now());
            l.collect(c);
        }
        let at = Instant::now();
        let stats = client.stats();
        self.reclaim_samples.push_back((at, stats.reclaimed_bytes));
        if *offloading != (stats.offloaded_bytes > 0) {
            *offloading = !*offloading;
            if *offloading {
                tracing::info!(
                    offloaded_bytes = stats.offloaded_bytes,
                    offloaded_writes = stats.offloaded_writes,
                    "off-loading: data is on stores"
                );
            } else {
                tracing::info!(
                    reclaimed_bytes = stats.reclaimed_bytes,
                    offloaded_writes = stats.offloaded_writes,
                    "reclaim finished: no data off-loaded"
                );
            }
        }
        while self.reclaim_samples.len() > 61 {
            self.reclaim_samples.pop_front();
        }
    }

    /// The store set's ids are their positions in the label (id `i + 1` at `stores[i]`).
    pub(super) fn check_store_ids(&self, client: &Client) -> Result<()> {
        for (i, info, _) in client.stores() {
            if info.id != i as u64 + 1 || i >= self.label.stores.len() {
                bail!("the store set on the base volume does not match its label (store {i} has id {})", info.id);
            }
        }
        Ok(())
    }

    pub(super) fn link_event(&mut self, event: Event) {
        match event {
            Event::StoreUp {
                store,
                link,
                sender,
            } => self.links[store] = Some((link, sender)),
            Event::StoreDown { store, link }
                if self.links[store].as_ref().is_some_and(|(l, _)| *l == link) =>
            {
                self.links[store] = None;
            }
            _ => {}
        }
    }

    /// What else waits in the inboxes, up to a batch, before the client is driven again.
    fn handle_waiting(
        &mut self,
        client: &mut Client,
        inbox: &mut mpsc::Receiver<Event>,
        requests: &mut mpsc::Receiver<Upward>,
        now: &impl Fn() -> u64,
    ) -> Result<()> {
        for _ in 0..1024 {
            let mut any = false;
            if let Ok(event) = inbox.try_recv() {
                self.handle(client, event, now())?;
                any = true;
            }
            if let Ok(Upward { op, reply }) = requests.try_recv() {
                self.upward(client, op, reply, now());
                any = true;
            }
            if !any {
                break;
            }
        }
        Ok(())
    }

    /// The base volume's device failed operations `e.ids`: each fails alone (its request is
    /// answered EIO, or ENOSPC when the device is full), and the volume goes on serving. A
    /// WARN at most every 10 s says how many.
    fn base_failed(&mut self, client: &mut Client, e: crate::disk::DiskError, now: u64) {
        let no_space = matches!(
            e.error.raw_os_error(),
            Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
        );
        self.base_errors += e.ids.len() as u64;
        if self
            .base_error_warned_at
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
            tracing::warn!(
                device = %self.base_device,
                op = e.op,
                error = %e.error,
                failed = self.base_errors,
                "base volume: operations failed; each fails its own request (EIO, or ENOSPC), the volume goes on serving"
            );
            self.base_error_warned_at = Some(Instant::now());
        }
        for id in e.ids {
            self.io.base_done(id, false);
            client.handle_base(now, BaseDone::Error { id, no_space });
        }
    }

    pub(super) fn handle(&mut self, client: &mut Client, event: Event, now: u64) -> Result<()> {
        match event {
            // The core learns it when a request to the store cannot be sent.
            Event::StoreUnreachable { .. } => {}
            Event::Base(Ok(done)) => {
                self.io.base_done(crate::disk::done_id(&done), true);
                client.handle_base(now, done.into())
            }
            // The base volume's device failed operations: only their requests fail.
            Event::Base(Err(e)) if !e.ids.is_empty() => self.base_failed(client, e, now),
            // Failed without saying which: stop before acknowledging anything more.
            Event::Base(Err(e)) => return Err(disk_error(e)),
            Event::StoreUp { store, .. } => {
                let was_down = self.links[store].is_none();
                self.link_event(event);
                if was_down {
                    tracing::info!(
                        store = store + 1,
                        address = %self.label.stores[store],
                        "store connected"
                    );
                }
            }
            Event::StoreDown { store, link } => {
                let current = self.links[store].as_ref().is_some_and(|(l, _)| *l == link);
                self.link_event(Event::StoreDown { store, link });
                if current {
                    self.io.store_lost(store);
                    tracing::warn!(
                        store = store + 1,
                        address = %self.label.stores[store],
                        offloaded_bytes = client.stats().offloaded_bytes,
                        "store disconnected"
                    );
                    client.connection_lost(now, store);
                }
            }
            Event::StoreFrame { store, link, frame } => {
                if self.links[store].as_ref().is_none_or(|(l, _)| *l != link) {
                    return Ok(());
                }
                match frame {
                    Frame::Reply { id, load, reply } => {
                        self.io.store_replied(store, id);
                        client.handle_volume_load(store, load.volume_queue_length as u64);
                        client.handle_store(now, store, id, reply, Some(load.queue_length as u64))
                    }
                    Frame::Load(load) => {
                        client.handle_volume_load(store, load.volume_queue_length as u64);
                        client.handle_load(store, load.queue_length as u64)
                    }
                    Frame::Request { .. } => {}
                }
            }
            Event::Report { json, reply } => {
                let text = if json {
                    self.status(client)
                } else {
                    self.metrics(client)
                };
                let _ = reply.send(text);
            }
            // New requests are refused from here; the log is closed once every request in
            // flight is answered (`run`), so no acknowledged write is missing from it.
            Event::Shutdown { done } => self.stopping = Some(done),
            Event::CacheReset { reply } => {
                let answer = match (self.volume.cache_mut(), self.cache_log.as_mut()) {
                    (Some(c), Some(l)) => {
                        l.reset(c);
                        Some(l.status_json(c).to_string())
                    }
                    _ => None,
                };
                let _ = reply.send(answer);
            }
        }
        Ok(())
    }

    pub(super) fn upward(&mut self, client: &mut Client, op: Op, reply: Completion, now: u64) {
        if self.stopping.is_some() {
            reply.complete(Err(std::io::Error::other("the volume is stopping")));
            return;
        }
        let request = match op {
            Op::Read { offset, length } => Request::Read {
                offset,
                length: length as u64,
            },
            Op::Write { offset, data, fua } => Request::Write { offset, data, fua },
            Op::WriteZeroes {
                offset,
                length,
                fua,
            } => Request::WriteZeroes {
                offset,
                length: length as u64,
                fua,
            },
            // The backend answers these itself (a flush syncs the base volume, `mod.rs`); one
            // that arrived here would be acknowledged without a sync, so it fails instead.
            Op::Flush | Op::Trim { .. } => {
                reply.complete(Err(std::io::Error::other(
                    "a flush or trim reached the volume's request path",
                )));
                return;
            }
        };
        let tag = self.next_tag;
        self.next_tag += 1;
        let read = matches!(request, Request::Read { .. });
        self.requests.insert(
            tag,
            Pending {
                reply,
                arrived: Instant::now(),
                read,
            },
        );
        self.volume.handle_request(now, client, tag, request);
        // A read the cache holds is answered already.
        self.answer();
    }

    /// Answers the requests the request path has answered.
    fn answer(&mut self) {
        while let Some((tag, answer)) = self.volume.poll_answer() {
            let Some(p) = self.requests.remove(&tag) else {
                continue;
            };
            let seconds = p.arrived.elapsed().as_secs_f64();
            if p.read {
                self.reads.record(seconds);
            } else {
                self.writes.record(seconds);
            }
            p.reply.complete(answer.map_err(|e| match e {
                ClientError::BadRequest => {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
                }
                // Answered ENOSPC on the wire.
                ClientError::NoSpace | ClientError::Base { no_space: true } => {
                    std::io::Error::from_raw_os_error(libc::ENOSPC)
                }
                _ => std::io::Error::other(e.to_string()),
            }));
        }
    }

    /// Hands out everything the core produced, until it produces nothing more. The time is read
    /// again on each pass: reads the page cache holds are answered in place, so one call can
    /// carry a whole pre-load.
    pub(super) fn drive(&mut self, client: &mut Client, clock: &impl Fn() -> u64) {
        loop {
            let now = clock();
            let mut progress = false;
            let ops: Vec<DiskOp> = std::iter::from_fn(|| client.poll_base())
                .map(DiskOp::from)
                .collect();
            if !ops.is_empty() {
                progress = true;
                let mut rest = Vec::new();
                for op in ops {
                    match (&self.inline, op) {
                        (
                            _,
                            DiskOp::Read {
                                id,
                                offset_bytes,
                                length_bytes,
                            },
                        ) if length_bytes <= CACHED_READ_MAX => {
                            match self
                                .cached_reads
                                .as_ref()
                                .and_then(|f| f.read_cached(offset_bytes, length_bytes))
                            {
                                Some(data) => client.handle_base(now, BaseDone::Read { id, data }),
                                None => rest.push(DiskOp::Read {
                                    id,
                                    offset_bytes,
                                    length_bytes,
                                }),
                            }
                        }
                        (Some(file), op @ DiskOp::Write { durable: false, .. }) => {
                            let id = crate::disk::op_id(&op);
                            match file.execute(op) {
                                Ok(DiskDone::Written { id }) => {
                                    client.handle_base(now, BaseDone::Written { id })
                                }
                                Ok(_) => unreachable!("a write"),
                                Err(e) => self.base_failed(client, e.of([id]), now),
                            }
                        }
                        (_, op) => rest.push(op),
                    }
                }
                for op in &rest {
                    self.io.base_submitted(op);
                }
                self.disk.submit_all(rest);
            }
            let mut lost = Vec::new();
            while let Some((store, id, request)) = client.poll_store() {
                progress = true;
                self.io.store_sent(store, id, &request);
                let mut frame = Vec::new();
                encode(&Frame::Request { id, request }, &mut frame);
                let sent = self
                    .links
                    .get(store)
                    .and_then(|l| l.as_ref())
                    .is_some_and(|(_, sender)| sender.try_send(frame).is_ok());
                if !sent && !lost.contains(&store) {
                    lost.push(store);
                }
            }
            for store in lost {
                self.io.store_lost(store);
                client.connection_lost(now, store);
            }
            while let Some((id, reply)) = client.poll_upward() {
                progress = true;
                self.volume.handle_reply(now, id, reply);
            }
            progress |= self.volume.pump(now, client);
            self.answer();
            while let Some(io) = self.volume.poll_cache_io() {
                if let (Some(c), Some(l)) = (self.volume.cache_mut(), self.cache_log.as_mut()) {
                    l.execute(c, io);
                }
            }
            let late = client.stats().late_writes;
            if late > self.late_writes_warned
                && self
                    .late_warned_at
                    .is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(10))
            {
                tracing::warn!(
                    writes = late - self.late_writes_warned,
                    timeout_ms = client.config().full_timeout_ns / 1_000_000,
                    "writes failed with ENOSPC: no store took them within the full timeout (a store cleaning a log of nearly all live data, or no store up)"
                );
                self.late_writes_warned = late;
                self.late_warned_at = Some(std::time::Instant::now());
            }
            let full = client.stores_full_since().is_some();
            if full != self.stores_full {
                self.stores_full = full;
                if full {
                    tracing::warn!(
                        timeout_ms = client.config().full_timeout_ns / 1_000_000,
                        "stores are full: reclaiming under load; writes that must be off-loaded wait, then fail with ENOSPC"
                    );
                } else {
                    tracing::info!("stores take writes again");
                }
            }
            if !progress {
                return;
            }
        }
    }
}
