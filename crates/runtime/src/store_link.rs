//! A client's connection to one versioned store (the store protocol), kept up: it connects
//! again and again, forwards frames both ways, and reports each connection's start and end. A
//! volume server holds one per store, a Sierra chunk server one per logger.

use std::time::Duration;

use cordillera_wire::store::Frame;
use tokio::io::{AsyncRead, AsyncWrite, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::store_server::{write_frames, FrameReader, HANDSHAKE_TIMEOUT};
use crate::tls::TlsClient;

/// Frames waiting for a store's connection at most. A store that leaves this many unread (its
/// connection writes nothing for that long) is taken as failed, as a silent one is: the client
/// goes on without it and deletes what it held when it returns.
pub const LINK_FRAMES: usize = 16384;

/// What a link reports. `link` numbers the link's connections, so that a late report of an
/// earlier one is told apart.
#[derive(Debug)]
pub enum LinkEvent {
    Up {
        store: usize,
        link: u64,
        sender: mpsc::Sender<Vec<u8>>,
    },
    Frame {
        store: usize,
        link: u64,
        frame: Frame,
    },
    Down {
        store: usize,
        link: u64,
    },
    /// A connection attempt failed (refused, unreachable); reported once per outage.
    Unreachable {
        store: usize,
    },
}

/// One store: connects (again and again), forwards frames both ways; with `tls`, each
/// connection authenticates first (a store that refuses the key is reported unreachable).
pub async fn store_link<E: From<LinkEvent> + Send + 'static>(
    store: usize,
    address: String,
    tls: Option<TlsClient>,
    events: mpsc::Sender<E>,
) {
    let mut link = 0u64;
    let mut reported_failure = false;
    loop {
        let connected = match TcpStream::connect(&address).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                match &tls {
                    None => Ok(Halves::Plain(stream.into_split())),
                    Some(tls) => {
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.connect(stream)).await {
                            Ok(Ok(stream)) => Ok(Halves::Tls(tokio::io::split(stream))),
                            Ok(Err(e)) => Err(e.to_string()),
                            Err(_) => Err(format!("no TLS handshake within {HANDSHAKE_TIMEOUT:?}")),
                        }
                    }
                }
            }
            Err(e) => Err(e.to_string()),
        };
        match connected {
            Ok(halves) => {
                reported_failure = false;
                link += 1;
                let go_on = match halves {
                    Halves::Plain((reader, writer)) => {
                        forward(store, link, &address, reader, writer, &events).await
                    }
                    Halves::Tls((reader, writer)) => {
                        forward(store, link, &address, reader, writer, &events).await
                    }
                };
                if !go_on {
                    return;
                }
            }
            Err(e) => {
                if !reported_failure {
                    tracing::warn!(%address, error = %e, "store unreachable; retrying");
                    reported_failure = true;
                    if events
                        .send(E::from(LinkEvent::Unreachable { store }))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

type TlsStream = tokio_openssl::SslStream<TcpStream>;

/// A connection's two halves: TCP's own, or TLS's.
enum Halves {
    Plain((OwnedReadHalf, OwnedWriteHalf)),
    Tls((ReadHalf<TlsStream>, WriteHalf<TlsStream>)),
}

/// Forwards frames both ways over one connection until it ends; false once the client is
/// gone (its events are no longer received).
async fn forward<E, R, W>(
    store: usize,
    link: u64,
    address: &str,
    mut reader: R,
    writer: W,
    events: &mpsc::Sender<E>,
) -> bool
where
    E: From<LinkEvent> + Send + 'static,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (sender, outbox) = mpsc::channel::<Vec<u8>>(LINK_FRAMES);
    if events
        .send(E::from(LinkEvent::Up {
            store,
            link,
            sender,
        }))
        .await
        .is_err()
    {
        return false;
    }
    let writing = tokio::spawn(write_frames(writer, outbox));
    // Waiting while the core's inbox is full: the store's socket is not read from meanwhile.
    let mut frames = FrameReader::new();
    let read = loop {
        match frames.next(&mut reader).await {
            Ok(Some(frame)) => {
                let event = E::from(LinkEvent::Frame { store, link, frame });
                if events.send(event).await.is_err() {
                    writing.abort();
                    return false;
                }
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    if let Err(e) = read {
        tracing::warn!(%address, error = %e, "store connection failed; reconnecting");
    }
    writing.abort();
    events
        .send(E::from(LinkEvent::Down { store, link }))
        .await
        .is_ok()
}
