//! A connection's tasks: dialling (an address list for the MDS, whose hello must answer),
//! accepting (a hello first, from our cluster), then frames both ways, each charged to the
//! memory budgets before its body is read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cordillera_gears::protocol::Endpoint;
use cordillera_wire::sierra::{decode, encode, frame_length, Frame};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};

use super::ClusterTls;
use super::{
    NetEvent, ANY_CLUSTER, BODY_TIMEOUT, DIAL_TIMEOUT, FRAME_MAX, HELLO_BYTES_MAX, HELLO_TIMEOUT,
    LINK_FRAMES, SMALL_FRAME,
};
use crate::limits::{Charge, ConnectionBudget};

/// A connection's halves: TCP's own, or inside TLS (`--cluster-key`).
pub(super) type Reader = Box<dyn AsyncRead + Send + Unpin>;
pub(super) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

fn plain(stream: TcpStream) -> (Reader, Writer) {
    let (r, w) = stream.into_split();
    (Box::new(r), Box::new(w))
}

pub(super) async fn dial(
    endpoint: Endpoint,
    conn: u64,
    address: String,
    hello: Frame,
    events: mpsc::Sender<NetEvent>,
    budget: Option<ConnectionBudget>,
    tls: Option<ClusterTls>,
) {
    let unreachable = |error: String| NetEvent::Unreachable {
        endpoint,
        conn,
        error,
    };
    let Some(budget) = budget else {
        let error = format!("{address}: this daemon has too many connections open");
        let _ = events.send(unreachable(error)).await;
        return;
    };
    // The MDS may be several processes, one active: its address is a list, and only the
    // active one answers a hello with its own (a standby does not listen; a paused one does
    // not answer).
    let mut errors = Vec::new();
    for address in address.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        match connect(endpoint, address, &hello, tls.as_ref()).await {
            Ok((reader, writer, incarnation)) => {
                run_connection(endpoint, conn, incarnation, reader, writer, events, budget).await;
                return;
            }
            Err(e) => errors.push(format!("{address}: {e}")),
        }
    }
    let _ = events.send(unreachable(errors.join("; "))).await;
}

/// Connects to `address` (and, with `tls`, authenticates) and says `hello`; from the MDS,
/// waits for its answering hello (its incarnation; 0 from others).
pub(super) async fn connect(
    endpoint: Endpoint,
    address: &str,
    hello: &Frame,
    tls: Option<&ClusterTls>,
) -> Result<(Reader, Writer, u64), String> {
    let stream = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(address)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("no answer in {DIAL_TIMEOUT:?}")),
    };
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = match tls {
        None => plain(stream),
        Some(tls) => match tokio::time::timeout(HELLO_TIMEOUT, tls.client.connect(stream)).await {
            Ok(Ok(stream)) => {
                let (r, w) = tokio::io::split(stream);
                (Box::new(r) as Reader, Box::new(w) as Writer)
            }
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err(format!("no TLS handshake in {HELLO_TIMEOUT:?}")),
        },
    };
    let mut bytes = Vec::new();
    encode(hello, &mut bytes);
    if writer.write_all(&bytes).await.is_err() {
        return Err("the connection closed at once".into());
    }
    if endpoint != Endpoint::Mds {
        return Ok((reader, writer, 0));
    }
    match tokio::time::timeout(DIAL_TIMEOUT, read_small(&mut reader)).await {
        Ok(Ok(Some(Frame::Hello {
            from: Endpoint::Mds,
            incarnation,
            ..
        }))) => Ok((reader, writer, incarnation)),
        Ok(Ok(Some(Frame::Refused(why)))) => Err(format!("refused: {why}")),
        Ok(Ok(Some(other))) => Err(format!("answered {other:?} instead of a hello")),
        Ok(Ok(None)) => Err("closed without a hello".into()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!(
            "no hello in {DIAL_TIMEOUT:?} (a paused or stale MDS?)"
        )),
    }
}

/// An accepted connection: with `tls`, its handshake (a peer without the cluster key is
/// dropped before it can say anything); then its hello (from our cluster), then frames both
/// ways.
#[allow(clippy::too_many_arguments)]
pub(super) async fn accepted(
    stream: TcpStream,
    conn: u64,
    cluster: u64,
    events: mpsc::Sender<NetEvent>,
    standby: Arc<AtomicBool>,
    mut budget: ConnectionBudget,
    answer: Option<Arc<Vec<u8>>>,
    tls: Option<ClusterTls>,
) {
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = match tls {
        None => plain(stream),
        Some(tls) => match budget
            .handshake(HELLO_TIMEOUT, tls.server.accept(stream))
            .await
        {
            Ok(Ok((stream, _))) => {
                let (r, w) = tokio::io::split(stream);
                (Box::new(r) as Reader, Box::new(w) as Writer)
            }
            Ok(Err(e)) => {
                tracing::warn!(conn, error = %e, "connection refused: no cluster key");
                return;
            }
            Err(e) => {
                tracing::warn!(conn, error = %e, "connection refused: no TLS handshake");
                return;
            }
        },
    };
    let hello = budget
        .handshake(HELLO_TIMEOUT, read_small(&mut reader))
        .await;
    let (from, incarnation) = match hello {
        Ok(Ok(Some(Frame::Hello {
            cluster: c,
            from,
            incarnation,
        }))) if c == cluster || c == ANY_CLUSTER && matches!(from, Endpoint::Client(_)) => {
            (from, incarnation)
        }
        Ok(Ok(Some(Frame::Hello { cluster: c, .. }))) => {
            let why = format!("this daemon is in cluster {cluster:#x}, not {c:#x}");
            return refuse(writer, why).await;
        }
        Ok(Ok(Some(_))) => return refuse(writer, "the first frame must be a hello".into()).await,
        Ok(Ok(None)) => return,
        Ok(Err(e)) => return refuse(writer, format!("bad frame: {e}")).await,
        Err(e) => return refuse(writer, e.to_string()).await,
    };
    if standby.load(Ordering::SeqCst) {
        // Only a wake is taken in standby.
        match tokio::time::timeout(HELLO_TIMEOUT, read_small(&mut reader)).await {
            Ok(Ok(Some(Frame::Wake))) => {
                let _ = events.send(NetEvent::Wake).await;
            }
            _ => refuse(writer, "in standby".into()).await,
        }
        return;
    }
    if let Some(hello) = answer {
        if writer.write_all(&hello).await.is_err() {
            return;
        }
    }
    run_connection(from, conn, incarnation, reader, writer, events, budget).await;
}

/// Tells the peer why, then closes.
async fn refuse(mut writer: Writer, why: String) {
    let mut bytes = Vec::new();
    encode(&Frame::Refused(why), &mut bytes);
    let _ = writer.write_all(&bytes).await;
    let _ = writer.shutdown().await;
}

/// Reports the connection, then forwards its frames until it closes.
async fn run_connection(
    endpoint: Endpoint,
    conn: u64,
    incarnation: u64,
    mut reader: Reader,
    writer: Writer,
    events: mpsc::Sender<NetEvent>,
    budget: ConnectionBudget,
) {
    let (sender, outbox) = mpsc::channel::<Vec<u8>>(LINK_FRAMES);
    let writing = tokio::spawn(write_frames(writer, outbox));
    let closer = Arc::new(Notify::new());
    let connected = NetEvent::Connected {
        endpoint,
        conn,
        incarnation,
        sender,
        closer: closer.clone(),
    };
    if events.send(connected).await.is_err() {
        writing.abort();
        return;
    }
    loop {
        let read = tokio::select! {
            read = read_charged(&mut reader, FRAME_MAX, Some(&budget)) => read,
            _ = closer.notified() => {
                // Closed by this side (a server entering standby): what was queued before is
                // written first (its last messages say it is going), then the socket closes.
                let _ = tokio::time::timeout(Duration::from_secs(2), writing).await;
                let _ = events.send(NetEvent::Closed { endpoint, conn }).await;
                return;
            }
        };
        match read {
            Ok(Some((frame, charge))) => {
                let event = NetEvent::Frame {
                    endpoint,
                    conn,
                    frame,
                    charge,
                };
                if events.send(event).await.is_err() {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(?endpoint, error = %e, "closing a connection: bad frame");
                break;
            }
        }
    }
    writing.abort();
    let _ = events.send(NetEvent::Closed { endpoint, conn }).await;
}

/// Writes the frames sent on `outbox` until either end closes: frames queued together go out in
/// one write (gathered into a buffer), a lone frame as it is (a MiB chunk write is not copied).
async fn write_frames(mut writer: Writer, mut outbox: mpsc::Receiver<Vec<u8>>) {
    let mut buffer = Vec::new();
    while let Some(first) = outbox.recv().await {
        let Ok(second) = outbox.try_recv() else {
            if writer.write_all(&first).await.is_err() {
                return;
            }
            continue;
        };
        buffer.clear();
        buffer.extend_from_slice(&first);
        buffer.extend_from_slice(&second);
        // Whatever else is queued goes in the same write.
        while buffer.len() < 1 << 20 {
            match outbox.try_recv() {
                Ok(more) => buffer.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if writer.write_all(&buffer).await.is_err() {
            return;
        }
    }
    let _ = writer.shutdown().await;
}

/// One frame: `Ok(None)` at a clean end of the stream between frames.
pub async fn read_frame(reader: &mut Reader) -> Result<Option<Frame>, String> {
    Ok(read_charged(reader, FRAME_MAX, None)
        .await?
        .map(|(frame, _)| frame))
}

/// A hello or a wake: at most [`HELLO_BYTES_MAX`] bytes.
pub(super) async fn read_small(reader: &mut Reader) -> Result<Option<Frame>, String> {
    Ok(read_charged(reader, HELLO_BYTES_MAX, None)
        .await?
        .map(|(frame, _)| frame))
}

/// One frame of at most `max` bytes (its length included), charged to `budget` (if any)
/// before its body is read.
async fn read_charged(
    reader: &mut Reader,
    max: usize,
    budget: Option<&ConnectionBudget>,
) -> Result<Option<(Frame, Option<Charge>)>, String> {
    let mut head = [0u8; 4];
    match reader.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    let total = frame_length(&head)
        .map_err(|e| e.to_string())?
        .expect("four bytes");
    if total > max {
        return Err(format!(
            "a frame of {total} bytes where at most {max} are taken"
        ));
    }
    let charge = match budget {
        Some(b) if total <= SMALL_FRAME => Some(b.charge_connection_only(total as u64).await),
        Some(b) => Some(b.charge(total as u64).await),
        None => None,
    };
    // Read into spare capacity: a MiB frame's buffer is not zeroed first.
    let mut buf = Vec::with_capacity(total);
    buf.extend_from_slice(&head);
    match tokio::time::timeout(BODY_TIMEOUT, read_to(reader, &mut buf, total)).await {
        Ok(Ok(())) if buf.len() == total => {}
        Ok(Ok(())) => {
            return Err(format!(
                "truncated frame: {} of its {total} bytes before the stream ended",
                buf.len()
            ))
        }
        Ok(Err(e)) => return Err(format!("truncated frame: {e}")),
        Err(_) => {
            return Err(format!(
                "a frame of {total} bytes not sent within {BODY_TIMEOUT:?} of its length"
            ))
        }
    }
    match decode(&buf) {
        Ok(Some((frame, _))) => Ok(Some((frame, charge))),
        Ok(None) => Err("incomplete frame".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Reads into `buf`'s spare capacity until it holds `total` bytes or the stream ends (never
/// past `total`, and never growing a buffer made with that capacity).
async fn read_to(reader: &mut Reader, buf: &mut Vec<u8>, total: usize) -> std::io::Result<()> {
    while buf.len() < total {
        let want = (total - buf.len()) as u64;
        if (&mut *reader).take(want).read_buf(buf).await? == 0 {
            break;
        }
    }
    Ok(())
}
