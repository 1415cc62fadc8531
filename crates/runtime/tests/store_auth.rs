//! The store's port with a cluster key (`store serve --cluster-key`): a client without TLS, with
//! an unknown identity or with a wrong key gets no reply at all; an authenticated client's ids
//! are bound to it, so another authenticated peer forging one reads, writes, deletes and
//! recovers nothing. (Bindings across a restart: `store_server::peers`'s tests, and
//! `cordillera-cli`'s `store_auth_cli`, which kills the store process.)

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cordillera_runtime::store_server::{serve_in_thread, ServeOptions, StoreAuth};
use cordillera_runtime::tls::{cluster_server, TlsClient};
use cordillera_vstore::store::{Reply, Request, StoreError};
use cordillera_wire::store::{decode, encode, Frame};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

const ALICE: &str = "8cd2a4b1c8e5f30e2d9a6b7c4e1f0a3d5b6c7d8e9f00112233445566778899aa";
const BOB: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978";
const WRONG: &str = "00d2a4b1c8e5f30e2d9a6b7c4e1f0a3d5b6c7d8e9f00112233445566778899aa";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A store on `dir/store` with the keys file `dir/keys.psk`, served on its own thread.
fn start(dir: &Path) -> SocketAddr {
    let keys = dir.join("keys.psk");
    std::fs::write(&keys, format!("alice:{ALICE}\nbob:{BOB}\n")).unwrap();
    let options = ServeOptions {
        auth: Some(StoreAuth {
            tls: cluster_server(&keys).unwrap(),
            peers: PathBuf::from(format!("{}.peers", dir.join("store").display())),
        }),
        ..ServeOptions::local(dir.join("store"), 16 << 20)
    };
    serve_in_thread(options).unwrap()
}

/// Sends one request and returns its reply, or `None` when the connection ends first.
async fn ask<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    id: u64,
    request: Request,
) -> Option<Reply> {
    let mut frame = Vec::new();
    encode(&Frame::Request { id, request }, &mut frame);
    s.write_all(&frame).await.ok()?;
    let mut buffer = Vec::new();
    loop {
        if let Some((frame, used)) = decode(&buffer).unwrap() {
            buffer.drain(..used);
            match frame {
                Frame::Reply { id: got, reply, .. } if got == id => return Some(reply),
                _ => continue,
            }
        }
        let mut chunk = [0u8; 65536];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("an answer or the end within 10 s")
            .ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}

async fn as_peer(
    addr: SocketAddr,
    identity: &str,
    key: &str,
) -> Result<tokio_openssl::SslStream<TcpStream>, String> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = TlsClient::psk(identity, &hex(key)).unwrap();
    tls.connect(tcp).await.map_err(|e| e.to_string())
}

fn write(client: u64, byte: u8) -> Request {
    Request::Write {
        client,
        volume: 1,
        offset_bytes: 0,
        version: 1,
        data: vec![byte; 4096],
    }
}

fn read(client: u64) -> Request {
    Request::Read {
        client,
        offset_bytes: 0,
        length_bytes: 4096,
    }
}

#[tokio::test]
async fn only_authenticated_peers_are_served_and_a_forged_client_id_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let addr = start(dir.path());

    // No TLS: the request is taken for a handshake that fails; nothing comes back.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    assert_eq!(ask(&mut plain, 1, read(7)).await, None);
    // An unknown identity, and a known one with the wrong key: refused in the handshake.
    assert!(as_peer(addr, "mallory", WRONG).await.is_err());
    assert!(as_peer(addr, "alice", WRONG).await.is_err());

    // Alice's client 7 holds her data.
    let mut alice = as_peer(addr, "alice", ALICE).await.unwrap();
    assert_eq!(ask(&mut alice, 1, write(7, 0xa1)).await, Some(Reply::Done));
    let Some(Reply::Read(pieces)) = ask(&mut alice, 2, read(7)).await else {
        panic!("alice reads her own data");
    };
    assert_eq!(pieces[0].1, vec![0xa1; 4096]);

    // Bob forging client 7: every kind of request is denied; his own id 8 is served.
    let denied = Some(Reply::Error(StoreError::Denied));
    let mut bob = as_peer(addr, "bob", BOB).await.unwrap();
    assert_eq!(ask(&mut bob, 1, read(7)).await, denied);
    assert_eq!(
        ask(&mut bob, 2, Request::ReadAny { client: 7 }).await,
        denied
    );
    let recover = Request::Metadata {
        client: 7,
        generation: 0,
    };
    assert_eq!(ask(&mut bob, 3, recover).await, denied);
    assert_eq!(ask(&mut bob, 4, write(7, 0xb0)).await, denied);
    let delete = Request::Delete {
        client: 7,
        volume: 1,
        offset_bytes: 0,
        length_bytes: 4096,
        version: 1,
        generation: 0,
    };
    assert_eq!(ask(&mut bob, 5, delete).await, denied);
    assert_eq!(ask(&mut bob, 6, write(8, 0xb1)).await, Some(Reply::Done));
    let Some(Reply::Read(pieces)) = ask(&mut alice, 3, read(7)).await else {
        panic!("alice's data is untouched");
    };
    assert_eq!(pieces[0].1, vec![0xa1; 4096]);
    assert_eq!(
        std::fs::read_to_string(format!("{}.peers", dir.path().join("store").display())).unwrap(),
        "7 alice\n8 bob\n"
    );
}
