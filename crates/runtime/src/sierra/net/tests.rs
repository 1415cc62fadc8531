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
