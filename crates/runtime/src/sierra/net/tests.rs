use super::*;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Silent connections holding every slot (a flood, or sockets left half-open) do not keep
/// a peer out: its hello takes the slot of the oldest one at once.
#[tokio::test]
async fn a_peer_gets_in_past_silent_connections_holding_every_slot() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (mds_events, mut inbox) = mpsc::channel(64);
    let mut mds = Net::new(7, Endpoint::Mds, 1, HashMap::new(), mds_events);
    mds.set_limits(Limits {
        connections: 3,
        ..Limits::default()
    });
    mds.listen(listener);
    let mut silent = Vec::new();
    for _ in 0..3 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (events, mut server_inbox) = mpsc::channel(64);
    let addresses = HashMap::from([(Endpoint::Mds, addr.to_string())]);
    let mut server = Net::new(7, Endpoint::Server(1), 1, addresses, events);
    let started = std::time::Instant::now();
    server.send(Endpoint::Mds, &Frame::SpecRequest);
    // The dialled connection comes up on the server's side (its queued frame goes then).
    let up = tokio::time::timeout(Duration::from_secs(3), server_inbox.recv())
        .await
        .expect("the dial ended")
        .expect("open");
    assert!(matches!(up, NetEvent::Connected { .. }), "{up:?}");
    assert!(server.handle(up).is_some());
    loop {
        let event = tokio::time::timeout(Duration::from_secs(3), inbox.recv())
            .await
            .expect("the peer got in before any hello timeout")
            .expect("open");
        if let NetEvent::Frame { frame, .. } = event {
            assert_eq!(frame, Frame::SpecRequest);
            break;
        }
    }
    assert!(started.elapsed() < HELLO_TIMEOUT, "{:?}", started.elapsed());
    let mut byte = [0u8; 1];
    let first = tokio::time::timeout(Duration::from_secs(2), silent[0].read(&mut byte))
        .await
        .expect("the oldest silent connection is closed, not left open");
    assert!(
        matches!(first, Ok(0) | Err(_)) || byte[0] != 0,
        "closed (after a refusal frame, if any): {first:?}"
    );
}

/// The next event of `inbox` that `net` passes on (its own bookkeeping handled).
async fn next_event(net: &mut Net, inbox: &mut mpsc::Receiver<NetEvent>) -> Option<NetEvent> {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(3), inbox.recv())
            .await
            .ok()??;
        if let Some(e) = net.handle(event) {
            return Some(e);
        }
    }
}

/// A chunk server that has heard from the MDS of term 5 refuses one of term 3 (a deposed
/// MDS still running): its connection is closed and nothing it sends is taken; a dialler
/// given both addresses skips an address that does not answer a hello (a standby does not
/// listen) and learns the active MDS's term from its hello.
#[tokio::test]
async fn an_mds_of_an_older_term_is_refused_and_the_active_one_found_in_a_list() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server_addr = listener.local_addr().unwrap();
    let (events, mut inbox) = mpsc::channel(64);
    let mut server = Net::new(7, Endpoint::Server(0), 1, HashMap::new(), events);
    server.listen(listener);
    let to_server = HashMap::from([(Endpoint::Server(0), server_addr.to_string())]);
    let mds_net = |term: u64| {
        let (tx, rx) = mpsc::channel(64);
        (Net::new(7, Endpoint::Mds, term, to_server.clone(), tx), rx)
    };
    let (mut newer, mut newer_inbox) = mds_net(5);
    newer.send(Endpoint::Server(0), &Frame::SpecRequest);
    // Its dial completes on its side (the frame waiting for it goes then).
    next_event(&mut newer, &mut newer_inbox)
        .await
        .expect("dialled");
    let up = next_event(&mut server, &mut inbox)
        .await
        .expect("connected");
    assert!(
        matches!(
            up,
            NetEvent::Connected {
                endpoint: Endpoint::Mds,
                incarnation: 5,
                ..
            }
        ),
        "{up:?}"
    );
    let first = next_event(&mut server, &mut inbox).await.expect("a frame");
    assert!(matches!(first, NetEvent::Frame { .. }), "{first:?}");
    let (mut older, mut older_inbox) = mds_net(3);
    older.send(Endpoint::Server(0), &Frame::SpecRequest);
    next_event(&mut older, &mut older_inbox)
        .await
        .expect("dialled");
    older.send(Endpoint::Server(0), &Frame::SpecRequest);
    // Nothing of the older MDS reaches the server.
    assert!(next_event(&mut server, &mut inbox).await.is_none());
    assert_eq!(server.stats.mds_fenced, 1);

    // The active MDS (term 9) listens after an address where nothing does.
    let nothing = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = nothing.local_addr().unwrap();
    drop(nothing);
    let active_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let active_addr = active_listener.local_addr().unwrap();
    let (tx, mut active_inbox) = mpsc::channel(64);
    let mut active = Net::new(7, Endpoint::Mds, 9, HashMap::new(), tx);
    active.listen(active_listener);
    let (tx, mut client_inbox) = mpsc::channel(64);
    let list = format!("{dead},{active_addr}");
    let mut client = Net::new(
        7,
        Endpoint::Server(2),
        1,
        HashMap::from([(Endpoint::Mds, list)]),
        tx,
    );
    client.send(Endpoint::Mds, &Frame::SpecRequest);
    let up = next_event(&mut client, &mut client_inbox)
        .await
        .expect("connected");
    assert!(
        matches!(
            up,
            NetEvent::Connected {
                endpoint: Endpoint::Mds,
                incarnation: 9,
                ..
            }
        ),
        "{up:?}"
    );
    loop {
        match next_event(&mut active, &mut active_inbox)
            .await
            .expect("the request")
        {
            NetEvent::Frame { frame, .. } => {
                assert_eq!(frame, Frame::SpecRequest);
                break;
            }
            _ => continue,
        }
    }
}

/// A keys file in `dir` with `alice` holding `hex`.
fn cluster_keys(dir: &std::path::Path, name: &str, hex: &str) -> ClusterTls {
    let path = dir.join(name);
    std::fs::write(&path, format!("alice:{hex}\n")).unwrap();
    ClusterTls::from_keys(&path, None).unwrap()
}

/// With the cluster key, the MDS and a chunk server talk inside TLS; a peer without TLS and
/// one with another key get no frame through (their hello, the cluster id, is never read),
/// and `ask_mds` with the key is answered.
#[tokio::test]
async fn with_the_cluster_key_only_its_holders_are_heard() {
    const KEY: &str = "8cd2a4b1c8e5f30e2d9a6b7c4e1f0a3d5b6c7d8e9f00112233445566778899aa";
    const OTHER: &str = "00d2a4b1c8e5f30e2d9a6b7c4e1f0a3d5b6c7d8e9f00112233445566778899aa";
    let dir = tempfile::tempdir().unwrap();
    let key = cluster_keys(dir.path(), "cluster.psk", KEY);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (mds_events, mut inbox) = mpsc::channel(64);
    let mut mds = Net::new(7, Endpoint::Mds, 1, HashMap::new(), mds_events);
    mds.set_tls(Some(key.clone()));
    mds.listen(listener);
    let addresses = HashMap::from([(Endpoint::Mds, addr.to_string())]);
    // (who, its TLS, whether it holds the cluster's key)
    let attempts: [(Endpoint, Option<ClusterTls>, bool); 3] = [
        (Endpoint::Server(1), None, false),
        (
            Endpoint::Server(2),
            Some(cluster_keys(dir.path(), "other.psk", OTHER)),
            false,
        ),
        (Endpoint::Server(3), Some(key.clone()), true),
    ];
    for (me, tls, holder) in attempts {
        let (events, mut server_inbox) = mpsc::channel(64);
        let mut server = Net::new(7, me, 1, addresses.clone(), events);
        server.set_tls(tls);
        server.send(Endpoint::Mds, &Frame::SpecRequest);
        if holder {
            // The dial completes (the MDS answered its hello): the queued frame goes.
            let up = next_event(&mut server, &mut server_inbox).await;
            assert!(matches!(up, Some(NetEvent::Connected { .. })), "{up:?}");
        }
        let heard = loop {
            match next_event(&mut mds, &mut inbox).await {
                Some(NetEvent::Frame {
                    endpoint, frame, ..
                }) => break Some((endpoint, frame)),
                Some(_) => continue,
                None => break None,
            }
        };
        if holder {
            assert_eq!(heard, Some((me, Frame::SpecRequest)));
            assert!(server.connected(Endpoint::Mds));
        } else {
            assert_eq!(heard, None, "{me:?} was heard");
            // Its dial failed (no MDS hello answers it): reported as the link closing.
            let failed = next_event(&mut server, &mut server_inbox).await;
            assert!(
                matches!(failed, Some(NetEvent::Closed { .. })),
                "{failed:?}"
            );
            assert!(!server.connected(Endpoint::Mds));
        }
    }
    // `cluster gear`'s path: without the key the MDS is unreachable; with it, it answers
    // (here the test's MDS is not a daemon: the request arrives as a frame).
    assert!(ask_mds(&addr.to_string(), None, &Frame::SpecRequest)
        .await
        .is_err());
}

/// A Sierra daemon beyond loopback needs the cluster key; its read-only figures stay on
/// loopback; `--insecure` overrides both.
#[test]
fn a_daemon_beyond_loopback_needs_the_cluster_key() {
    assert!(check_exposure(Some("127.0.0.1:7000"), Some("127.0.0.1:7100"), false, false).is_ok());
    let e = check_exposure(Some("0.0.0.0:7000"), None, false, false).unwrap_err();
    assert!(e.to_string().contains("--cluster-key"), "{e}");
    assert!(check_exposure(Some("0.0.0.0:7000"), None, true, false).is_ok());
    let e = check_exposure(None, Some("0.0.0.0:7100"), true, false).unwrap_err();
    assert!(e.to_string().contains("--http"), "{e}");
    assert!(check_exposure(Some("0.0.0.0:7000"), Some("0.0.0.0:7100"), false, true).is_ok());
}

/// A frame read from a connection: whole (its buffer made at its size, read into without
/// zeroing), cut short by the stream's end (a clear error, not a frame), or two back to back.
#[tokio::test]
async fn frames_are_read_whole_and_a_cut_one_is_an_error() {
    let spec = Frame::Spec(vec![0x5a; 300_000]);
    let mut bytes = Vec::new();
    cordillera_wire::sierra::encode(&spec, &mut bytes);
    cordillera_wire::sierra::encode(&Frame::Wake, &mut bytes);
    let (ours, theirs) = tokio::io::duplex(64 << 10);
    let whole = bytes.clone();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let mut theirs = theirs;
        theirs.write_all(&whole).await.unwrap();
    });
    let mut reader: conn::Reader = Box::new(ours);
    let first = read_frame(&mut reader).await.unwrap();
    assert_eq!(first, Some(spec.clone()));
    assert_eq!(read_frame(&mut reader).await.unwrap(), Some(Frame::Wake));
    assert_eq!(read_frame(&mut reader).await.unwrap(), None, "a clean end");

    // The same frame with its last 1,000 bytes missing.
    let spec_len = cordillera_wire::sierra::frame_length(&bytes)
        .unwrap()
        .unwrap();
    let (ours, theirs) = tokio::io::duplex(64 << 10);
    let short = bytes[..spec_len - 1_000].to_vec();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let mut theirs = theirs;
        theirs.write_all(&short).await.unwrap();
    });
    let mut reader: conn::Reader = Box::new(ours);
    let e = read_frame(&mut reader).await.unwrap_err();
    assert!(
        e.contains("truncated frame") && e.contains(&format!("of its {spec_len} bytes")),
        "{e}"
    );
}
