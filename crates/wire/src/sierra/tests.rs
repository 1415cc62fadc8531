//! Every frame round-trips; a partial frame asks for more; a corrupt one is refused with a
//! typed error.

use super::*;

fn view(group: u32) -> GroupView {
    GroupView {
        group: GroupId(group),
        epoch: 7 + group as u64,
        replicas: vec![0, 3, 5],
        primary: Some(3),
        available: 0b101,
        rebuilding: None,
        slots: 9,
    }
}

/// One of every Sierra message, with its fields' edge values.
fn message_samples() -> Vec<Message> {
    let layout = ObjectLayout {
        object: ObjectId(42),
        size_bytes: 5 << 20,
        chunk_bytes: 1 << 20,
        chunks: vec![(GroupId(1), 0), (GroupId(4), 2)],
        groups: vec![view(1), view(4)],
    };
    vec![
        Message::Heartbeat {
            server: 3,
            incarnation: 99,
            sent_at: 1234,
            primaries: vec![(GroupId(1), 8), (GroupId(2), 1)],
            log_full: vec![GroupId(2)],
        },
        Message::ReleasedPrimary {
            group: GroupId(2),
            epoch: 5,
        },
        Message::Standby { server: 4 },
        Message::RebuildDone {
            group: GroupId(3),
            epoch: 2,
            replica: 5,
        },
        Message::WriteSuperblock {
            id: 1,
            group: GroupId(1),
            epoch: 3,
            data: vec![1, 2, 3],
        },
        Message::Lease {
            until: 777,
            primaries: vec![view(0), view(6)],
        },
        Message::BecomePrimary {
            view: view(2),
            superblock: Some(vec![9; 10]),
        },
        Message::BecomePrimary {
            view: GroupView {
                primary: None,
                rebuilding: Some(4),
                ..view(2)
            },
            superblock: None,
        },
        Message::ReleasePrimary {
            group: GroupId(2),
            epoch: 6,
        },
        Message::EnterStandby,
        Message::GroupChanged { view: view(3) },
        Message::Rebuild { view: view(5) },
        Message::SuperblockWritten { id: 4, ok: true },
        Message::Create {
            id: 5,
            object: ObjectId(1),
            size_bytes: 1 << 30,
        },
        Message::Lookup {
            id: 6,
            object: ObjectId(1),
        },
        Message::LookupGroup {
            id: 7,
            group: GroupId(8),
        },
        Message::Delete {
            id: 8,
            object: ObjectId(1),
        },
        Message::Created {
            id: 9,
            result: Ok(layout.clone()),
        },
        Message::Located {
            id: 10,
            result: Err(MdsError::NoSuchObject),
        },
        Message::Located {
            id: 10,
            result: Ok(layout),
        },
        Message::GroupLocated {
            id: 11,
            result: Ok(view(1)),
        },
        Message::GroupLocated {
            id: 11,
            result: Err(MdsError::NoSuchGroup),
        },
        Message::Deleted {
            id: 12,
            result: Ok(()),
        },
        Message::Deleted {
            id: 12,
            result: Err(MdsError::Exists),
        },
        Message::Read {
            id: 13,
            piece: 12,
            group: GroupId(1),
            offset_bytes: 4096,
            length_bytes: 8192,
        },
        Message::Write {
            id: 14,
            piece: 14,
            group: GroupId(1),
            epoch: 3,
            offset_bytes: 4096,
            data: vec![7; 4096],
        },
        Message::ReadDone {
            id: 15,
            result: Ok(vec![1; 100]),
        },
        Message::ReadDone {
            id: 15,
            result: Err(ServeError::LeaseExpired),
        },
        Message::WriteDone {
            id: 16,
            result: Err(ServeError::NoSpace),
        },
        Message::WriteDone {
            id: 16,
            result: Ok(()),
        },
        Message::Replicate {
            id: 17,
            group: GroupId(2),
            epoch: 4,
            offset_bytes: 0,
            data: vec![3; 512],
        },
        Message::Replicated { id: 18, ok: false },
    ]
}

/// Every frame kind: hellos, the control frames, load reports and every message.
fn samples() -> Vec<Frame> {
    let mut frames = vec![
        Frame::Hello {
            cluster: 0xfeed,
            from: Endpoint::Server(3),
            incarnation: 5,
        },
        Frame::Hello {
            cluster: 1,
            from: Endpoint::Mds,
            incarnation: 1,
        },
        Frame::Hello {
            cluster: 1,
            from: Endpoint::Client(9),
            incarnation: 2,
        },
        Frame::SpecRequest,
        Frame::Spec(b"{}".to_vec()),
        Frame::Wake,
        Frame::Gear(2),
        Frame::Refused("wrong cluster".into()),
    ];
    frames.extend(load_samples());
    frames.extend(message_samples().into_iter().map(Frame::Message));
    frames
}

/// Load frames: empty, and with the widest counts.
fn load_samples() -> Vec<Frame> {
    vec![
        Frame::Load(vec![]),
        Frame::Load(vec![
            (
                1_700_000_000,
                cordillera_gears::learned::ServerSecond {
                    random_reads: 3,
                    random_writes: 4,
                    sequential_read_bytes: 1 << 20,
                    sequential_write_bytes: 5,
                    requests: 9,
                    read_bytes: 6,
                    write_bytes: u64::MAX,
                },
            ),
            (1_700_000_001, Default::default()),
        ]),
    ]
}

#[test]
fn every_frame_round_trips_and_a_partial_one_asks_for_more() {
    let frames = samples();
    let mut stream = Vec::new();
    for f in &frames {
        let mut one = Vec::new();
        encode(f, &mut one);
        assert_eq!(decode(&one).unwrap(), Some((f.clone(), one.len())), "{f:?}");
        for cut in 0..one.len() {
            assert_eq!(decode(&one[..cut]).unwrap(), None, "{f:?} cut at {cut}");
        }
        stream.extend_from_slice(&one);
    }
    // Back to back on one connection.
    let mut at = 0;
    for f in &frames {
        let (got, used) = decode(&stream[at..]).unwrap().unwrap();
        assert_eq!(&got, f);
        at += used;
    }
    assert_eq!(at, stream.len());
}

#[test]
fn corrupt_frames_are_refused_with_a_typed_error() {
    for f in samples() {
        let mut one = Vec::new();
        encode(&f, &mut one);
        // A frame that claims fewer bytes than its fields need, or more than they fill.
        let len = u32::from_le_bytes(one[..4].try_into().unwrap());
        if len > 2 {
            let mut short = one.clone();
            short[..4].copy_from_slice(&(len - 1).to_le_bytes());
            assert!(decode(&short).is_err(), "{f:?} one byte short");
        }
        let mut long = one.clone();
        long[..4].copy_from_slice(&(len + 1).to_le_bytes());
        long.push(0);
        assert_eq!(
            decode(&long),
            Err(WireError::Malformed("trailing bytes")),
            "{f:?}"
        );
        let mut version = one.clone();
        version[4] = 9;
        assert_eq!(decode(&version), Err(WireError::Version(9)));
    }
    let mut unknown = Vec::new();
    encode(&Frame::Wake, &mut unknown);
    unknown[5] = 200;
    assert_eq!(decode(&unknown), Err(WireError::Type(200)));
    let too_long = (FRAME_BYTES_MAX + 1).to_le_bytes();
    assert_eq!(
        decode(&too_long),
        Err(WireError::TooLong(FRAME_BYTES_MAX + 1))
    );
    // A list whose count cannot fit in the frame is refused before anything is allocated.
    let mut lease = Vec::new();
    encode(
        &Frame::Message(Message::Lease {
            until: 1,
            primaries: vec![],
        }),
        &mut lease,
    );
    let n = lease.len();
    lease[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(decode(&lease), Err(WireError::Malformed("lease primaries")));
}
