//! The MDS daemon over TCP: a chunk server's heartbeat gets a lease and primaries; a client
//! creates an object; after the MDS is stopped and started again on its directory, the object,
//! the primaries and their epochs are still there; a hello from another cluster, a first frame
//! that is not a hello, and a spec that differs from the stored one are refused.

use std::collections::BTreeMap;
use std::time::Duration;

use cordillera_gears::model::{GroupId, ObjectId};
use cordillera_gears::protocol::{Endpoint, Message};
use cordillera_runtime::sierra::mds::{serve, MdsOptions};
use cordillera_runtime::sierra::spec::ClusterSpec;
use cordillera_wire::sierra::{decode, encode, Frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Peer {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Peer {
    async fn connect(addr: std::net::SocketAddr, cluster: u64, from: Endpoint) -> Peer {
        let stream = TcpStream::connect(addr).await.unwrap();
        let mut p = Peer {
            stream,
            buf: Vec::new(),
        };
        p.send(&Frame::Hello {
            cluster,
            from,
            incarnation: 1,
        })
        .await;
        p
    }

    async fn send(&mut self, f: &Frame) {
        let mut bytes = Vec::new();
        encode(f, &mut bytes);
        self.stream.write_all(&bytes).await.unwrap();
    }

    /// The next frame, or `None` at the end of the stream or after 5 s.
    async fn recv(&mut self) -> Option<Frame> {
        loop {
            if let Some((frame, used)) = decode(&self.buf).unwrap() {
                self.buf.drain(..used);
                return Some(frame);
            }
            let mut chunk = [0u8; 65536];
            let n = tokio::time::timeout(Duration::from_secs(5), self.stream.read(&mut chunk))
                .await
                .ok()?
                .ok()?;
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Frames until one matches.
    async fn until(&mut self, want: impl Fn(&Frame) -> bool) -> Frame {
        loop {
            let f = self.recv().await.expect("a frame before the stream ends");
            if want(&f) {
                return f;
            }
        }
    }
}

async fn start(
    dir: &std::path::Path,
    spec: Option<ClusterSpec>,
) -> anyhow::Result<std::net::SocketAddr> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut tx = Some(tx);
    let options = MdsOptions {
        dir: dir.to_path_buf(),
        spec,
        listen: Some("127.0.0.1:0".into()),
        http: None,
        etcd: None,
        tls: None,
        insecure: false,
    };
    let task = tokio::spawn(serve(options, move |l| {
        if let Some(tx) = tx.take() {
            let _ = tx.send(l.addr);
        }
    }));
    match rx.await {
        Ok(addr) => Ok(addr),
        Err(_) => Err(task.await.unwrap().unwrap_err()),
    }
}

/// Heartbeats every server once (as server 0 … 5 would), collecting each group's primary.
async fn heartbeat_all(
    addr: std::net::SocketAddr,
    spec: &ClusterSpec,
    held: &BTreeMap<u32, (u32, u64)>,
) -> (Vec<Peer>, BTreeMap<u32, (u32, u64)>) {
    let mut peers = Vec::new();
    let mut primaries = BTreeMap::new();
    for s in 0..spec.servers.len() as u32 {
        let mut p = Peer::connect(addr, spec.cluster, Endpoint::Server(s)).await;
        let mine = held
            .iter()
            .filter(|(_, &(p, _))| p == s)
            .map(|(&g, &(_, e))| (GroupId(g), e))
            .collect();
        p.send(&Frame::Message(Message::Heartbeat {
            server: s,
            incarnation: 100 + s as u64,
            sent_at: 1,
            primaries: mine,
            log_full: Vec::new(),
        }))
        .await;
        loop {
            match p.recv().await.expect("the MDS answers") {
                Frame::Message(Message::BecomePrimary { view, .. }) => {
                    primaries.insert(view.group.0, (s, view.epoch));
                }
                Frame::Message(Message::Lease {
                    primaries: leased, ..
                }) => {
                    for v in leased {
                        primaries.insert(v.group.0, (s, v.epoch));
                    }
                    break;
                }
                _ => {}
            }
        }
        peers.push(p);
    }
    (peers, primaries)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mds_serves_keeps_its_state_across_a_restart_and_refuses_strangers() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ClusterSpec::local(0xc0ffee, 3, 2, 1);
    let err = start(dir.path(), None).await.unwrap_err().to_string();
    assert!(err.contains("--spec"), "{err}");

    let addr = start(dir.path(), Some(spec.clone())).await.unwrap();
    let (_peers, primaries) = heartbeat_all(addr, &spec, &BTreeMap::new()).await;
    assert_eq!(primaries.len(), 6 * 16, "every group has a primary");

    let mut client = Peer::connect(addr, spec.cluster, Endpoint::Client(7)).await;
    client.send(&Frame::SpecRequest).await;
    let Frame::Spec(text) = client.until(|f| matches!(f, Frame::Spec(_))).await else {
        unreachable!()
    };
    assert_eq!(ClusterSpec::parse(&text).unwrap(), spec);
    client
        .send(&Frame::Message(Message::Create {
            id: 1,
            object: ObjectId(9),
            size_bytes: 10 << 20,
        }))
        .await;
    let Frame::Message(Message::Created {
        result: Ok(layout), ..
    }) = client
        .until(|f| matches!(f, Frame::Message(Message::Created { .. })))
        .await
    else {
        panic!("the object was not created")
    };
    assert_eq!(layout.chunks.len(), 10);

    // A stranger from another cluster, and a first frame that is not a hello.
    let mut stranger = Peer::connect(addr, 1, Endpoint::Client(1)).await;
    let refused = stranger.recv().await;
    assert!(
        matches!(&refused, Some(Frame::Refused(why)) if why.contains("cluster")),
        "{refused:?}"
    );
    let mut rude = Peer {
        stream: TcpStream::connect(addr).await.unwrap(),
        buf: Vec::new(),
    };
    rude.send(&Frame::SpecRequest).await;
    assert!(matches!(rude.recv().await, Some(Frame::Refused(_))));

    // A second MDS on the same directory while the first runs cannot open its state.
    let second = start(dir.path(), None).await;
    assert!(second.is_err(), "two MDSs on one directory");
    drop(_peers);
    drop(client);

    // A restart (a new process would do the same: everything is in mds.redb).
    let dir2 = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), dir2.path());
    let mut other = spec.clone();
    other.lease_ms = 900;
    let err = start(dir2.path(), Some(other))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("differs"), "{err}");
    let addr = start(dir2.path(), None).await.unwrap();
    let (_peers, again) = heartbeat_all(addr, &spec, &primaries).await;
    assert_eq!(again, primaries, "primaries and epochs survive the restart");
    let mut client = Peer::connect(addr, spec.cluster, Endpoint::Client(7)).await;
    client
        .send(&Frame::Message(Message::Lookup {
            id: 2,
            object: ObjectId(9),
        }))
        .await;
    let Frame::Message(Message::Located {
        result: Ok(found), ..
    }) = client
        .until(|f| matches!(f, Frame::Message(Message::Located { .. })))
        .await
    else {
        panic!("the object is gone")
    };
    assert_eq!(found.chunks, layout.chunks);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// The MDS's `/status` document.
async fn status(http: std::net::SocketAddr) -> serde_json::Value {
    let mut s = TcpStream::connect(http).await.unwrap();
    s.write_all(b"GET /status HTTP/1.0\r\n\r\n").await.unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    let json = &body[body.find("\r\n\r\n").expect("a header") + 4..];
    serde_json::from_str(json).unwrap()
}

/// Memory a peer can make the MDS hold: a first frame longer than a hello is refused before
/// anything is allocated; frames announced long after a hello are charged to the connection's
/// and the daemon's budgets before their bodies are read, so forty peers each announcing the
/// longest frame and sending no more hold at most the daemon's 1 GiB (not 40 × 33 MiB), the
/// MDS goes on serving, and the charges go when the peers do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_announcing_long_frames_are_held_to_the_memory_budgets() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ClusterSpec::local(0xb0d9e7, 3, 2, 1);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut tx = Some(tx);
    let options = MdsOptions {
        dir: dir.path().to_path_buf(),
        spec: Some(spec.clone()),
        listen: Some("127.0.0.1:0".into()),
        http: Some("127.0.0.1:0".into()),
        etcd: None,
        tls: None,
        insecure: false,
    };
    tokio::spawn(serve(options, move |l| {
        if let Some(tx) = tx.take() {
            let _ = tx.send((l.addr, l.http.expect("an endpoint")));
        }
    }));
    let (addr, http) = rx.await.unwrap();

    // A first frame of 4 KiB: refused, naming the limit.
    let mut stranger = Peer {
        stream: TcpStream::connect(addr).await.unwrap(),
        buf: Vec::new(),
    };
    stranger
        .stream
        .write_all(&4096u32.to_le_bytes())
        .await
        .unwrap();
    match stranger.recv().await {
        Some(Frame::Refused(why)) => assert!(why.contains("at most 256"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }

    let longest = cordillera_wire::sierra::FRAME_BYTES_MAX;
    let mut hogs = Vec::new();
    for i in 0..40 {
        let mut p = Peer::connect(addr, spec.cluster, Endpoint::Client(1000 + i)).await;
        p.stream.write_all(&longest.to_le_bytes()).await.unwrap();
        p.stream.write_all(&[1, 2, 3]).await.unwrap();
        hogs.push(p);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let charged = status(http).await["frames_charged_bytes"].as_u64().unwrap();
    let frame = longest as u64 + 4;
    assert!(
        charged <= 1 << 30,
        "{charged} bytes charged, over the 1 GiB budget"
    );
    assert!(
        charged >= 30 * frame,
        "only {charged} bytes charged: were the frames charged?"
    );

    // The MDS still serves.
    let (_peers, primaries) = heartbeat_all(addr, &spec, &BTreeMap::new()).await;
    assert_eq!(
        primaries.len(),
        spec.servers.len() * spec.groups_per_server as usize
    );

    drop(hogs);
    let mut charged = u64::MAX;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        charged = status(http).await["frames_charged_bytes"].as_u64().unwrap();
        if charged == 0 {
            break;
        }
    }
    assert_eq!(charged, 0, "charges left after the peers went");
}
