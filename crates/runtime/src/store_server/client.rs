//! A blocking client of the store protocol.

use super::*;

/// A blocking client of the store protocol, for tools and tests: pipelined sends, replies
/// matched by request id, load broadcasts kept.
pub struct StoreClient {
    stream: std::net::TcpStream,
    buffer: Vec<u8>,
    /// Requests sent but not yet written to the socket (written before waiting for a reply).
    outgoing: Vec<u8>,
    next_id: u64,
    pub last_load: Option<Load>,
    /// Replies that arrived while waiting for another.
    early: HashMap<u64, Reply>,
}

impl StoreClient {
    pub fn connect(addr: SocketAddr) -> std::io::Result<StoreClient> {
        let stream = std::net::TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(StoreClient {
            stream,
            buffer: Vec::new(),
            outgoing: Vec::new(),
            next_id: 1,
            last_load: None,
            early: HashMap::new(),
        })
    }

    /// Sends a request without waiting for its reply; returns its id. Requests are gathered
    /// and written together when the client next waits for a reply (or [`StoreClient::flush`]).
    pub fn send(&mut self, request: Request) -> std::io::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        encode(&Frame::Request { id, request }, &mut self.outgoing);
        if self.outgoing.len() >= 1 << 20 {
            self.flush()?;
        }
        Ok(id)
    }

    /// Writes every request sent so far to the socket.
    pub fn flush(&mut self) -> std::io::Result<()> {
        use std::io::Write;
        if !self.outgoing.is_empty() {
            self.stream.write_all(&self.outgoing)?;
            self.outgoing.clear();
        }
        Ok(())
    }

    /// The next reply, whichever request it answers.
    pub fn receive(&mut self) -> std::io::Result<(u64, Reply)> {
        if let Some(id) = self.early.keys().next().copied() {
            return Ok((id, self.early.remove(&id).expect("early reply")));
        }
        self.read_reply()
    }

    pub(super) fn read_reply(&mut self) -> std::io::Result<(u64, Reply)> {
        use std::io::Read;
        self.flush()?;
        loop {
            match decode(&self.buffer) {
                Ok(Some((frame, used))) => {
                    self.buffer.drain(..used);
                    match frame {
                        Frame::Reply { id, load, reply } => {
                            self.last_load = Some(load);
                            return Ok((id, reply));
                        }
                        Frame::Load(load) => self.last_load = Some(load),
                        Frame::Request { .. } => {
                            return Err(std::io::Error::other("the store sent a request"))
                        }
                    }
                }
                Ok(None) => {
                    let mut chunk = [0u8; 65536];
                    let n = self.stream.read(&mut chunk)?;
                    if n == 0 {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                    self.buffer.extend_from_slice(&chunk[..n]);
                }
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            }
        }
    }

    /// Sends a request and waits for its reply.
    pub fn call(&mut self, request: Request) -> std::io::Result<Reply> {
        let id = self.send(request)?;
        loop {
            let (got, reply) = self.read_reply()?;
            if got == id {
                return Ok(reply);
            }
            self.early.insert(got, reply);
        }
    }
}
