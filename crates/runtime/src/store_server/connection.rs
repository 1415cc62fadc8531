//! One client connection: frames read and charged to its budget, large writes' data read
//! straight into their own buffers, replies written together.

use super::*;

/// A frame on its way to a client, with what its request holds until it is written.
pub(crate) struct Outgoing {
    pub(super) frame: Vec<u8>,
    /// Data sent between `frame`'s bytes, each after `frame[..at]` (a read reply's pieces, see
    /// `encode_read_reply`); empty for other frames.
    pub(super) data: Vec<(usize, Vec<u8>)>,
    /// Released when the frame is dropped, after it is written.
    pub(super) _charge: Option<Charge>,
    pub(super) unwritten: Arc<AtomicUsize>,
}

impl Segments for Outgoing {
    fn segments<'a>(&'a self, out: &mut Vec<&'a [u8]>) {
        let mut at = 0;
        for (cut, data) in &self.data {
            out.push(&self.frame[at..*cut]);
            out.push(data);
            at = *cut;
        }
        out.push(&self.frame[at..]);
    }

    fn bytes(&self) -> usize {
        self.frame.len() + self.data.iter().map(|(_, d)| d.len()).sum::<usize>()
    }
}

/// A frame to write, as the byte slices it is sent as, in order.
pub(crate) trait Segments {
    fn segments<'a>(&'a self, out: &mut Vec<&'a [u8]>);

    /// The frame's length.
    fn bytes(&self) -> usize {
        let mut slices = Vec::new();
        self.segments(&mut slices);
        slices.iter().map(|s| s.len()).sum()
    }
}

impl Segments for Vec<u8> {
    fn segments<'a>(&'a self, out: &mut Vec<&'a [u8]>) {
        out.push(self);
    }

    fn bytes(&self) -> usize {
        self.len()
    }
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        self.unwritten.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection's reading side. Besides reading into one buffer, it may read into two at
/// once: the rest of a large write's data into the buffer the store keeps, and what follows
/// (the next frame's head) into the frame buffer, with one system call where the transport
/// allows it (plain TCP); otherwise the second buffer is left for the next read.
pub(crate) trait FrameSource: AsyncRead + Unpin + Send + 'static {
    /// Reads at most `first_limit` bytes into `first`'s spare capacity and, when the
    /// transport allows, what follows (at most `second_limit` bytes) into `second`'s; the
    /// bytes read (0 at the end of the stream).
    fn read_two<'a>(
        &'a mut self,
        first: &'a mut Vec<u8>,
        first_limit: usize,
        _second: &'a mut Vec<u8>,
        _second_limit: usize,
    ) -> impl std::future::Future<Output = std::io::Result<usize>> + Send + 'a {
        async move { (&mut *self).take(first_limit as u64).read_buf(first).await }
    }
}

impl<T: AsyncRead + Send + 'static> FrameSource for tokio::io::ReadHalf<T> {}

impl FrameSource for tokio::net::tcp::OwnedReadHalf {
    fn read_two<'a>(
        &'a mut self,
        first: &'a mut Vec<u8>,
        first_limit: usize,
        second: &'a mut Vec<u8>,
        second_limit: usize,
    ) -> impl std::future::Future<Output = std::io::Result<usize>> + Send + 'a {
        use std::os::fd::AsRawFd;
        async move {
            let first_len = (first.capacity() - first.len()).min(first_limit);
            let second_len = (second.capacity() - second.len()).min(second_limit);
            let fd = self.as_ref().as_raw_fd();
            loop {
                self.readable().await?;
                let read = self.as_ref().try_io(tokio::io::Interest::READABLE, || {
                    let iov = [
                        libc::iovec {
                            iov_base: first.spare_capacity_mut().as_mut_ptr().cast(),
                            iov_len: first_len,
                        },
                        libc::iovec {
                            iov_base: second.spare_capacity_mut().as_mut_ptr().cast(),
                            iov_len: second_len,
                        },
                    ];
                    // SAFETY: each iovec lies in its vector's spare capacity (`*_len` bytes of
                    // it at most), which nothing else refers to while the call runs.
                    let n = unsafe { libc::readv(fd, iov.as_ptr(), 2) };
                    if n < 0 {
                        Err(std::io::Error::last_os_error())
                    } else {
                        Ok(n as usize)
                    }
                });
                match read {
                    Ok(n) => {
                        let in_first = n.min(first_len);
                        // SAFETY: readv initialised the first `n` bytes of the two iovecs,
                        // filling the first before the second.
                        unsafe {
                            first.set_len(first.len() + in_first);
                            second.set_len(second.len() + (n - in_first));
                        }
                        return Ok(n);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

/// Bytes a connection reads at once when frames are small or unknown.
pub(super) const READ_CHUNK: usize = 1 << 20;
/// Writes with at least this much data have it read straight into a buffer of their own.
pub(super) const DIRECT_DATA_MIN: usize = 16 << 10;
/// The read after such a write: the next frame's head and a little of its data.
pub(super) const HEAD_READ: usize = 4 << 10;
/// What every request is charged besides its data.
pub(super) const REQUEST_OVERHEAD: u64 = 4096;

/// Hands a request to the server's task (waiting while its inbox is full: the connection is
/// not read from meanwhile); false once the server has stopped.
pub(super) async fn dispatch(
    events: &mpsc::Sender<Event>,
    connection: u64,
    id: u64,
    request: Request,
    charge: Charge,
) -> bool {
    events
        .send(Event::Request {
            connection,
            id,
            request,
            charge,
        })
        .await
        .is_ok()
}

/// What a write with `data_bytes` of data is charged when read.
pub(super) fn write_charge(data_bytes: usize) -> u64 {
    REQUEST_OVERHEAD + data_bytes as u64
}

/// What a request is charged when read: its own bytes and the most its reply may hold.
pub(super) fn request_charge(request: &Request, largest_record: u64) -> u64 {
    let reply = match request {
        Request::Write { data, .. } => return write_charge(data.len()),
        Request::Read { length_bytes, .. } => {
            (*length_bytes).min(cordillera_vstore::format::PAYLOAD_BYTES_MAX as u64 + 4096)
        }
        Request::ReadAny { .. } => largest_record,
        Request::Delete { .. } => 0,
        Request::Metadata { .. } => 64 << 10,
    };
    REQUEST_OVERHEAD + reply
}

/// One connection: frames in, frames out. Each request is charged to the connection's budget
/// before it goes to the core, and the charge is released once its reply is written: a client
/// that never reads its replies is no longer read from once its budget is used.
/// `identity`: the peer the connection's TLS authenticated, if any (its requests' client ids
/// are bound to it).
pub(super) async fn connection<R, W>(
    id: u64,
    (mut reader, writer): (R, W),
    identity: Option<String>,
    budget: ConnectionBudget,
    largest_record: Arc<AtomicU64>,
    events: mpsc::Sender<Event>,
) where
    R: FrameSource,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Frames waiting to be written: replies (each holds one of the connection's requests) and
    // at most one load broadcast (sent only when nothing else waits).
    let (sender, outbox) = mpsc::channel::<Outgoing>(budget.requests_max() + 1);
    let _ = events
        .send(Event::Connected {
            connection: id,
            sender,
            unwritten: Arc::new(AtomicUsize::new(0)),
            identity,
        })
        .await;
    let writing = tokio::spawn(write_frames(writer, outbox));
    // A client that sends replies or garbage is not speaking the protocol: its connection is
    // dropped (the store and other clients are unaffected).
    let mut buffer: Vec<u8> = Vec::with_capacity(1 << 16);
    // What the next read may bring: a large chunk, or (after a write whose data was read into
    // its own buffer, when more such writes are likely) little more than the next frame's head,
    // so that its data, too, goes straight where it is kept.
    let mut next_read = READ_CHUNK;
    let read: Result<(), cordillera_wire::store::WireError> = 'read: loop {
        buffer.reserve(next_read);
        // Every slot taken: a connection that never sent anything, or (the clients reconnect
        // by themselves) the one idle longest, gives its slot up.
        let mut limited = (&mut reader).take(next_read as u64);
        let read = tokio::select! {
            read = limited.read_buf(&mut buffer) => read,
            _ = budget.evicted() => {
                tracing::info!(connection = id, "connection closed to free its slot (every slot taken; it was idle)");
                break 'read Ok(());
            }
        };
        match read {
            Ok(0) | Err(_) => break Ok(()),
            Ok(_) => budget.established(),
        }
        next_read = READ_CHUNK;
        let mut at = 0;
        loop {
            // A large write whose data has not all arrived: its data is read into a buffer of
            // its own, which the store keeps (a copy out of the frame buffer costs as much as
            // the read itself). It is charged first: a client over its budget is not read from.
            match decode_write_head(&buffer[at..]) {
                Err(e) => break 'read Err(e),
                Ok(Some(head))
                    if head.data_bytes >= DIRECT_DATA_MIN
                        && buffer.len() - at < WriteHead::BYTES + head.data_bytes =>
                {
                    let charge = budget.charge(write_charge(head.data_bytes)).await;
                    let mut data = Vec::with_capacity(head.data_bytes);
                    data.extend_from_slice(&buffer[at + WriteHead::BYTES..]);
                    buffer.clear();
                    at = 0;
                    // The rest of the data, and with it (one system call on plain TCP) the
                    // next frame's head and a little of its data into the frame buffer.
                    buffer.reserve(HEAD_READ);
                    while data.len() < head.data_bytes {
                        let want = head.data_bytes - data.len();
                        match reader
                            .read_two(&mut data, want, &mut buffer, HEAD_READ)
                            .await
                        {
                            Ok(0) | Err(_) => break 'read Ok(()),
                            Ok(_) => {}
                        }
                    }
                    let request = head.request(data);
                    if !dispatch(&events, id, head.id, request, charge).await {
                        break 'read Ok(());
                    }
                    // Whatever came with the data is decoded before the next read, which
                    // takes little more than a frame's head.
                    next_read = HEAD_READ;
                    continue;
                }
                _ => {}
            }
            let (frame, used) = match decode(&buffer[at..]) {
                Ok(Some(decoded)) => decoded,
                Ok(None) => break,
                Err(e) => break 'read Err(e),
            };
            at += used;
            let Frame::Request {
                id: request_id,
                request,
            } = frame
            else {
                break 'read Ok(());
            };
            let charge = budget
                .charge(request_charge(
                    &request,
                    largest_record.load(Ordering::Relaxed),
                ))
                .await;
            if !dispatch(&events, id, request_id, request, charge).await {
                break 'read Ok(());
            }
        }
        buffer.drain(..at);
    };
    match read {
        Ok(()) => tracing::info!(connection = id, "client disconnected"),
        Err(e) => tracing::info!(connection = id, error = %e, "client connection closed"),
    }
    let _ = events.send(Event::Closed { connection: id }).await;
    writing.abort();
}

/// Writes the frames sent on `outbox` to `writer` until either closes. Every frame already
/// waiting goes out in one vectored write: replies completed together (a group commit
/// acknowledges many) cost one system call, not one each, and no frame or read data is copied
/// on the way (the transport may take fewer slices at a time). Frames are dropped (releasing
/// what they hold) only once written.
pub(crate) async fn write_frames<W: AsyncWrite + Unpin, T: Segments>(
    mut writer: W,
    mut outbox: mpsc::Receiver<T>,
) {
    let mut held: Vec<T> = Vec::new();
    while let Some(first) = outbox.recv().await {
        let mut bytes = first.bytes();
        held.push(first);
        while bytes < (1 << 20) {
            match outbox.try_recv() {
                Ok(more) => {
                    bytes += more.bytes();
                    held.push(more);
                }
                Err(_) => break,
            }
        }
        let mut slices = Vec::new();
        for frame in &held {
            frame.segments(&mut slices);
        }
        let written = write_all_slices(&mut writer, &slices).await;
        drop(slices);
        held.clear();
        if written.is_err() {
            break;
        }
    }
}

/// Writes every byte of `slices`, in order, with vectored writes of up to 1,024 slices.
async fn write_all_slices<W: AsyncWrite + Unpin>(
    writer: &mut W,
    slices: &[&[u8]],
) -> std::io::Result<()> {
    let (mut first, mut skip) = (0, 0);
    loop {
        while first < slices.len() && slices[first].len() == skip {
            first += 1;
            skip = 0;
        }
        if first == slices.len() {
            return Ok(());
        }
        let iov: Vec<std::io::IoSlice> = slices[first..]
            .iter()
            .take(1024)
            .enumerate()
            .map(|(i, s)| std::io::IoSlice::new(if i == 0 { &s[skip..] } else { s }))
            .collect();
        let n = writer.write_vectored(&iov).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        (first, skip) = crate::disk::advance_slices(slices, (first, skip), n);
    }
}

/// Frames read from a connection, one at a time (so that the caller may wait between them).
pub(crate) struct FrameReader {
    buffer: Vec<u8>,
    at: usize,
}

impl FrameReader {
    pub(crate) fn new() -> FrameReader {
        FrameReader {
            buffer: Vec::with_capacity(1 << 16),
            at: 0,
        }
    }

    /// The next frame; `Ok(None)` once the stream ends or fails, `Err` if a frame does not
    /// decode.
    pub(crate) async fn next<R: AsyncRead + Unpin>(
        &mut self,
        reader: &mut R,
    ) -> Result<Option<Frame>, cordillera_wire::store::WireError> {
        loop {
            if let Some((frame, used)) = decode(&self.buffer[self.at..])? {
                self.at += used;
                return Ok(Some(frame));
            }
            self.buffer.drain(..self.at);
            self.at = 0;
            // Straight into the frame buffer's spare capacity: no intermediate copy.
            self.buffer.reserve(1 << 16);
            match reader.read_buf(&mut self.buffer).await {
                Ok(0) | Err(_) => return Ok(None),
                Ok(_) => {}
            }
        }
    }
}
