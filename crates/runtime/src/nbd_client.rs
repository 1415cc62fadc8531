//! A minimal NBD client for `cordillera replay`: the fixed newstyle handshake with
//! `NBD_OPT_GO` (falling back to `NBD_OPT_EXPORT_NAME` when a server does not know it), then
//! pipelined requests with simple replies, split into a sending half and a receiving half so
//! that requests and replies flow concurrently.
//!
//! Structured replies are not negotiated, so every reply is a simple reply; a read's data
//! follows its reply header and its length is the request's, which the receiving half looks up
//! by handle in the table both halves share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cordillera_wire::nbd::{self as wire, Command, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

#[derive(Debug, thiserror::Error)]
pub enum NbdClientError {
    #[error("bad NBD address {0:?}: expected nbd://HOST:PORT[/EXPORT] or HOST:PORT")]
    BadUrl(String),
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("the server does not speak fixed newstyle NBD: {0}")]
    Handshake(String),
    #[error("the server refused export {export:?}: {message}")]
    Refused { export: String, message: String },
    #[error("NBD connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("reply for handle {0}, which has no request in flight")]
    UnknownHandle(u64),
    #[error("bad reply magic {0:#x}")]
    BadReplyMagic(u32),
}

/// `nbd://HOST:PORT[/EXPORT]` (or a bare `HOST:PORT`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NbdUrl {
    pub addr: String,
    pub export: String,
}

impl std::str::FromStr for NbdUrl {
    type Err = NbdClientError;

    fn from_str(s: &str) -> Result<NbdUrl, NbdClientError> {
        let rest = s.strip_prefix("nbd://").unwrap_or(s);
        let (addr, export) = rest.split_once('/').unwrap_or((rest, ""));
        let valid = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !valid || export.contains('\0') || export.len() > wire::STRING_BYTES_MAX {
            return Err(NbdClientError::BadUrl(s.to_owned()));
        }
        Ok(NbdUrl {
            addr: addr.to_owned(),
            export: export.to_owned(),
        })
    }
}

impl std::fmt::Display for NbdUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "nbd://{}/{}", self.addr, self.export)
    }
}

/// What the server said about the export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportInfo {
    pub length_bytes: u64,
    pub transmission_flags: u16,
    /// From `NBD_INFO_BLOCK_SIZE` when the server sent it; 1, 4096 and 32 MiB otherwise.
    pub minimum_block: u32,
    pub preferred_block: u32,
    pub maximum_payload: u32,
}

/// The direction of a request as the receiving half reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
}

#[derive(Clone, Copy)]
struct InFlight {
    kind: Kind,
    length: u32,
    sent: Instant,
}

type Table = Arc<Mutex<HashMap<u64, InFlight>>>;

/// Connects and negotiates; returns the export and the two halves of the connection.
pub async fn connect(url: &NbdUrl) -> Result<(ExportInfo, Sender, Receiver), NbdClientError> {
    let mut stream =
        TcpStream::connect(&url.addr)
            .await
            .map_err(|source| NbdClientError::Connect {
                addr: url.addr.clone(),
                source,
            })?;
    stream.set_nodelay(true)?;
    let info = handshake(&mut stream, &url.export).await?;
    let (read, write) = stream.into_split();
    let table: Table = Arc::default();
    Ok((
        info,
        Sender {
            stream: BufWriter::with_capacity(256 << 10, write),
            table: Arc::clone(&table),
            next_handle: 1,
        },
        Receiver {
            stream: read,
            table,
            scratch: Vec::new(),
        },
    ))
}

async fn handshake(stream: &mut TcpStream, export: &str) -> Result<ExportInfo, NbdClientError> {
    let mut greeting = [0u8; 18];
    stream.read_exact(&mut greeting).await?;
    let magic = u64::from_be_bytes(greeting[..8].try_into().expect("8 bytes"));
    let opt = u64::from_be_bytes(greeting[8..16].try_into().expect("8 bytes"));
    if magic != wire::NBDMAGIC || opt != wire::IHAVEOPT {
        return Err(NbdClientError::Handshake(
            "no newstyle greeting (oldstyle servers are not supported)".into(),
        ));
    }
    let flags = u16::from_be_bytes([greeting[16], greeting[17]]);
    if flags & wire::FLAG_FIXED_NEWSTYLE == 0 {
        return Err(NbdClientError::Handshake(
            "the server does not offer fixed newstyle".into(),
        ));
    }
    let no_zeroes = flags & wire::FLAG_NO_ZEROES != 0;
    let mut client_flags = wire::FLAG_C_FIXED_NEWSTYLE;
    if no_zeroes {
        client_flags |= wire::FLAG_C_NO_ZEROES;
    }
    stream.write_all(&client_flags.to_be_bytes()).await?;

    // NBD_OPT_GO asking for the block size constraints.
    let mut data = (export.len() as u32).to_be_bytes().to_vec();
    data.extend_from_slice(export.as_bytes());
    data.extend_from_slice(&1u16.to_be_bytes());
    data.extend_from_slice(&wire::INFO_BLOCK_SIZE.to_be_bytes());
    send_option(stream, wire::OPT_GO, &data).await?;
    let mut info = ExportInfo {
        length_bytes: 0,
        transmission_flags: 0,
        minimum_block: 1,
        preferred_block: 4096,
        maximum_payload: 32 << 20,
    };
    let mut have_export = false;
    loop {
        let (reply, data) = receive_option_reply(stream, wire::OPT_GO).await?;
        match reply {
            wire::REP_ACK => break,
            wire::REP_INFO if data.len() >= 2 => {
                let kind = u16::from_be_bytes([data[0], data[1]]);
                match kind {
                    wire::INFO_EXPORT if data.len() >= 12 => {
                        info.length_bytes = u64::from_be_bytes(data[2..10].try_into().expect("8"));
                        info.transmission_flags = u16::from_be_bytes([data[10], data[11]]);
                        have_export = true;
                    }
                    wire::INFO_BLOCK_SIZE if data.len() >= 14 => {
                        let word =
                            |i: usize| u32::from_be_bytes(data[i..i + 4].try_into().expect("4"));
                        info.minimum_block = word(2).max(1);
                        info.preferred_block = word(6).max(1);
                        info.maximum_payload = word(10).max(1);
                    }
                    _ => {} // other information is not needed
                }
            }
            wire::REP_ERR_UNSUP => {
                // An older server: NBD_OPT_EXPORT_NAME has no error path but works everywhere.
                return export_name(stream, export, no_zeroes, info).await;
            }
            error if error & (1 << 31) != 0 => {
                return Err(NbdClientError::Refused {
                    export: export.to_owned(),
                    message: format!(
                        "option error {:#x}: {}",
                        error,
                        String::from_utf8_lossy(&data)
                    ),
                });
            }
            _ => {} // unknown reply types without the error bit are ignored
        }
    }
    if !have_export {
        return Err(NbdClientError::Handshake(
            "NBD_OPT_GO ended without NBD_INFO_EXPORT".into(),
        ));
    }
    Ok(info)
}

async fn export_name(
    stream: &mut TcpStream,
    export: &str,
    no_zeroes: bool,
    mut info: ExportInfo,
) -> Result<ExportInfo, NbdClientError> {
    send_option(stream, wire::OPT_EXPORT_NAME, export.as_bytes()).await?;
    let mut reply = [0u8; 10];
    stream.read_exact(&mut reply).await?;
    info.length_bytes = u64::from_be_bytes(reply[..8].try_into().expect("8 bytes"));
    info.transmission_flags = u16::from_be_bytes([reply[8], reply[9]]);
    if !no_zeroes {
        let mut zeroes = [0u8; 124];
        stream.read_exact(&mut zeroes).await?;
    }
    Ok(info)
}

async fn send_option(stream: &mut TcpStream, option: u32, data: &[u8]) -> std::io::Result<()> {
    let mut out = wire::IHAVEOPT.to_be_bytes().to_vec();
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    stream.write_all(&out).await
}

async fn receive_option_reply(
    stream: &mut TcpStream,
    option: u32,
) -> Result<(u32, Vec<u8>), NbdClientError> {
    let mut header = [0u8; 20];
    stream.read_exact(&mut header).await?;
    let magic = u64::from_be_bytes(header[..8].try_into().expect("8 bytes"));
    let echoed = u32::from_be_bytes(header[8..12].try_into().expect("4 bytes"));
    let reply = u32::from_be_bytes(header[12..16].try_into().expect("4 bytes"));
    let length = u32::from_be_bytes(header[16..20].try_into().expect("4 bytes"));
    if magic != wire::OPTION_REPLY_MAGIC || echoed != option {
        return Err(NbdClientError::Handshake(format!(
            "bad option reply (magic {magic:#x}, option {echoed})"
        )));
    }
    if length > wire::OPTION_BYTES_MAX {
        return Err(NbdClientError::Handshake(format!(
            "option reply of {length} bytes"
        )));
    }
    let mut data = vec![0u8; length as usize];
    stream.read_exact(&mut data).await?;
    Ok((reply, data))
}

/// The sending half: requests are buffered until [`Sender::flush`].
pub struct Sender {
    stream: BufWriter<OwnedWriteHalf>,
    table: Table,
    next_handle: u64,
}

impl Sender {
    /// Queues a read; returns its handle.
    pub async fn read(&mut self, offset: u64, length: u32) -> std::io::Result<u64> {
        self.request(Command::Read, 0, offset, length, Kind::Read, &[])
            .await
    }

    /// Queues a write of `data`; returns its handle.
    pub async fn write(&mut self, offset: u64, data: &[u8]) -> std::io::Result<u64> {
        let length = u32::try_from(data.len()).expect("payload under 4 GiB");
        self.request(Command::Write, 0, offset, length, Kind::Write, data)
            .await
    }

    /// Sends what is buffered.
    pub async fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush().await
    }

    /// Sends `NBD_CMD_DISC` and closes the sending direction.
    pub async fn disconnect(mut self) -> std::io::Result<()> {
        let request = Request {
            flags: 0,
            command: Command::Disc,
            handle: 0,
            offset: 0,
            length: 0,
        };
        self.stream
            .write_all(&wire::encode_request(&request))
            .await?;
        self.stream.flush().await?;
        self.stream.shutdown().await
    }

    async fn request(
        &mut self,
        command: Command,
        flags: u16,
        offset: u64,
        length: u32,
        kind: Kind,
        data: &[u8],
    ) -> std::io::Result<u64> {
        let handle = self.next_handle;
        self.next_handle += 1;
        let request = Request {
            flags,
            command,
            handle,
            offset,
            length,
        };
        // In the table before any byte is sent: the reply cannot arrive first.
        self.table.lock().expect("table lock").insert(
            handle,
            InFlight {
                kind,
                length,
                sent: Instant::now(),
            },
        );
        self.stream
            .write_all(&wire::encode_request(&request))
            .await?;
        if !data.is_empty() {
            self.stream.write_all(data).await?;
        }
        Ok(handle)
    }
}

/// One reply.
#[derive(Clone, Copy, Debug)]
pub struct Reply {
    pub handle: u64,
    pub kind: Kind,
    /// 0 for success, else the NBD error value (an errno).
    pub error: u32,
    /// The request's length in bytes.
    pub length: u32,
    /// When the request was queued for sending.
    pub sent: Instant,
    /// When its reply header arrived.
    pub received: Instant,
}

/// The receiving half.
pub struct Receiver {
    stream: OwnedReadHalf,
    table: Table,
    scratch: Vec<u8>,
}

impl Receiver {
    /// The next reply, a read's data consumed and dropped; `None` when the server closed the
    /// connection cleanly between replies.
    pub async fn next(&mut self) -> Result<Option<Reply>, NbdClientError> {
        let mut header = [0u8; 16];
        match self.stream.read_exact(&mut header).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let received = Instant::now();
        let magic = u32::from_be_bytes(header[..4].try_into().expect("4 bytes"));
        if magic != wire::SIMPLE_REPLY_MAGIC {
            return Err(NbdClientError::BadReplyMagic(magic));
        }
        let error = u32::from_be_bytes(header[4..8].try_into().expect("4 bytes"));
        let handle = u64::from_be_bytes(header[8..16].try_into().expect("8 bytes"));
        let in_flight = self
            .table
            .lock()
            .expect("table lock")
            .remove(&handle)
            .ok_or(NbdClientError::UnknownHandle(handle))?;
        if in_flight.kind == Kind::Read && error == 0 {
            let length = in_flight.length as usize;
            if self.scratch.len() < length {
                self.scratch.resize(length, 0);
            }
            self.stream.read_exact(&mut self.scratch[..length]).await?;
        }
        Ok(Some(Reply {
            handle,
            kind: in_flight.kind,
            error,
            length: in_flight.length,
            sent: in_flight.sent,
            received,
        }))
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.table.lock().expect("table lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let url: NbdUrl = "nbd://127.0.0.1:10809/disk".parse().unwrap();
        assert_eq!(url.addr, "127.0.0.1:10809");
        assert_eq!(url.export, "disk");
        let bare: NbdUrl = "localhost:7000".parse().unwrap();
        assert_eq!(bare.export, "");
        assert_eq!(bare.to_string(), "nbd://localhost:7000/");
        for bad in [
            "nbd://",
            "nbd://host",
            "host:port",
            ":80",
            "nbd://h:99999/x",
        ] {
            assert!(bad.parse::<NbdUrl>().is_err(), "{bad} accepted");
        }
    }
}
