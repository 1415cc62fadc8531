use super::*;

fn view(group: u32, primary: ServerId) -> GroupView {
    GroupView {
        group: GroupId(group),
        epoch: 1,
        replicas: vec![primary],
        primary: Some(primary),
        available: 1,
        rebuilding: None,
        slots: 1,
    }
}

/// A write over two chunks in two groups whose primaries never answer: both pieces time
/// out at the same instant on their last attempt. The first fails the request; the second
/// must find it gone (this once panicked, found by the testbed lab at the paper's scale).
#[test]
fn pieces_of_one_request_timing_out_together_fail_it_once() {
    let mut config = ClientConfig::new(0);
    config.retries_max = 1;
    let mut c = ObjectClient::new(config);
    let object = ObjectId(7);
    c.write(0, 1, object, 0, vec![1u8; 2048]);
    let (to, message) = c.poll_message().expect("a lookup");
    assert_eq!(to, Endpoint::Mds);
    let Message::Lookup { id, .. } = message else {
        panic!("expected a lookup, got {message:?}");
    };
    let layout = ObjectLayout {
        object,
        size_bytes: 2048,
        chunk_bytes: 1024,
        chunks: vec![(GroupId(0), 0), (GroupId(1), 0)],
        groups: vec![view(0, 0), view(1, 1)],
    };
    c.handle_message(
        1,
        Endpoint::Mds,
        Message::Located {
            id,
            result: Ok(layout),
        },
    );
    let mut now = 1;
    let mut done = Vec::new();
    for _ in 0..64 {
        // The MDS answers lookups of the groups; the primaries never answer.
        while let Some((to, m)) = c.poll_message() {
            if let (Endpoint::Mds, Message::LookupGroup { id, group }) = (to, m) {
                c.handle_message(
                    now,
                    Endpoint::Mds,
                    Message::GroupLocated {
                        id,
                        result: Ok(view(group.0, group.0)),
                    },
                );
            }
        }
        while let Some(d) = c.poll_done() {
            done.push(d);
        }
        let Some(t) = c.poll_timeout() else { break };
        now = now.max(t);
        c.handle_timeout(now);
    }
    assert_eq!(done.len(), 1, "one answer: {done:?}");
    assert!(
        matches!(done[0], (1, Err(ClientError::Unavailable { .. }))),
        "{done:?}"
    );
    assert_eq!(c.in_flight(), 0);
}

/// A server closing its connections (standby) sends its pieces back to the MDS's view at
/// once, not after the request timeout.
#[test]
fn a_closed_server_is_looked_up_again_at_once() {
    let mut c = ObjectClient::new(ClientConfig::new(0));
    let object = ObjectId(7);
    c.write(0, 1, object, 0, vec![1u8; 512]);
    let Some((_, Message::Lookup { id, .. })) = c.poll_message() else {
        panic!("a lookup first");
    };
    let layout = ObjectLayout {
        object,
        size_bytes: 1024,
        chunk_bytes: 1024,
        chunks: vec![(GroupId(0), 0)],
        groups: vec![view(0, 4)],
    };
    c.handle_message(
        1,
        Endpoint::Mds,
        Message::Located {
            id,
            result: Ok(layout),
        },
    );
    assert!(matches!(
        c.poll_message(),
        Some((Endpoint::Server(4), Message::Write { .. }))
    ));
    c.server_gone(2, 4);
    assert_eq!(c.stats().retries, 1);
    let t = c.poll_timeout().expect("the retry's delay");
    assert!(
        t < 2 + c.config.request_timeout_ns / 10,
        "retried soon, at {t}"
    );
    c.handle_timeout(t);
    assert!(
        matches!(
            c.poll_message(),
            Some((Endpoint::Mds, Message::LookupGroup { .. }))
        ),
        "the group is looked up again"
    );
}
