//! The NBD protocol's messages (the NetworkBlockDevice/nbd repository's `doc/proto.md`), for a
//! server: the fixed newstyle handshake, option haggling (`NBD_OPT_EXPORT_NAME`, `ABORT`,
//! `LIST`, `INFO`, `GO`), and transmission requests and simple replies. Sans-I/O: the caller
//! reads the fixed-size headers and payloads these functions name and writes what they return.
//!
//! Everything here is big-endian ("network byte order"). Malformed input is a typed
//! [`NbdError`], never a panic; which errors allow the connection to continue is stated on each.
//! [`haggle`] decides each option of the handshake, STARTTLS and a port's TLS policy included.

pub mod haggle;

/// `NBDMAGIC`, the first 8 bytes a server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the newstyle greeting and the prefix of every option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Prefix of every option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flags.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_READ_ONLY: u16 = 1 << 1;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_ROTATIONAL: u16 = 1 << 4;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;

/// Option reply types; errors have bit 31 set.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_POLICY: u32 = (1 << 31) + 2;
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub const REP_ERR_PLATFORM: u32 = (1 << 31) + 4;
pub const REP_ERR_TLS_REQD: u32 = (1 << 31) + 5;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
pub const REP_ERR_SHUTDOWN: u32 = (1 << 31) + 7;
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = (1 << 31) + 8;

/// Information types of `NBD_REP_INFO`.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Command flags.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;

/// Error values of replies.
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// The longest option payload a server accepts (an export name is at most 4,096 bytes).
pub const OPTION_BYTES_MAX: u32 = 64 * 1024;
/// Strings (export names) are at most this long.
pub const STRING_BYTES_MAX: usize = 4096;
pub const OPTION_HEADER_BYTES: usize = 16;
pub const REQUEST_HEADER_BYTES: usize = 28;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NbdError {
    /// The peer does not speak this protocol: close the connection.
    #[error("bad magic number {0:#x}")]
    BadMagic(u64),
    /// Client flags the server did not offer: the protocol says to close the connection.
    #[error("unknown client flags {0:#x}")]
    UnknownClientFlags(u32),
    /// An option longer than [`OPTION_BYTES_MAX`]: close the connection (reading it could
    /// exhaust memory).
    #[error("option of {0} bytes is longer than the {OPTION_BYTES_MAX} accepted")]
    OptionTooLong(u32),
    /// An option's payload does not parse: answer `NBD_REP_ERR_INVALID`, and go on.
    #[error("malformed option payload: {0}")]
    BadOption(&'static str),
}

/// The server's first 18 bytes: `NBDMAGIC`, `IHAVEOPT`, handshake flags (fixed newstyle, no
/// zeroes).
pub fn greeting() -> [u8; 18] {
    let mut out = [0u8; 18];
    out[..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    out[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    out[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    out
}

/// What the client answered to the greeting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientFlags {
    pub fixed_newstyle: bool,
    pub no_zeroes: bool,
}

pub fn parse_client_flags(bytes: [u8; 4]) -> Result<ClientFlags, NbdError> {
    let flags = u32::from_be_bytes(bytes);
    if flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(NbdError::UnknownClientFlags(flags));
    }
    Ok(ClientFlags {
        fixed_newstyle: flags & FLAG_C_FIXED_NEWSTYLE != 0,
        no_zeroes: flags & FLAG_C_NO_ZEROES != 0,
    })
}

/// An option's header: which option, and how many payload bytes follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionHeader {
    pub option: u32,
    pub length: u32,
}

pub fn parse_option_header(bytes: [u8; OPTION_HEADER_BYTES]) -> Result<OptionHeader, NbdError> {
    let magic = u64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
    if magic != IHAVEOPT {
        return Err(NbdError::BadMagic(magic));
    }
    let option = u32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let length = u32::from_be_bytes(bytes[12..16].try_into().expect("4 bytes"));
    if length > OPTION_BYTES_MAX {
        return Err(NbdError::OptionTooLong(length));
    }
    Ok(OptionHeader { option, length })
}

/// The payload of `NBD_OPT_INFO` and `NBD_OPT_GO`: an export name and the information asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfoRequest {
    pub name: String,
    pub requests: Vec<u16>,
}

pub fn parse_info_request(payload: &[u8]) -> Result<InfoRequest, NbdError> {
    let take = |at: usize, n: usize| {
        payload
            .get(at..at + n)
            .ok_or(NbdError::BadOption("truncated"))
    };
    let name_len = u32::from_be_bytes(take(0, 4)?.try_into().expect("4 bytes")) as usize;
    if name_len > STRING_BYTES_MAX || name_len + 6 > payload.len() {
        return Err(NbdError::BadOption("name length beyond the payload"));
    }
    let name = std::str::from_utf8(take(4, name_len)?)
        .map_err(|_| NbdError::BadOption("export name is not UTF-8"))?
        .to_owned();
    if name.contains('\0') {
        return Err(NbdError::BadOption("export name holds a NUL"));
    }
    let count = u16::from_be_bytes(take(4 + name_len, 2)?.try_into().expect("2 bytes")) as usize;
    let list = &payload[6 + name_len..];
    if list.len() != 2 * count {
        return Err(NbdError::BadOption(
            "information request count does not match",
        ));
    }
    let requests = list
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    Ok(InfoRequest { name, requests })
}

/// An export name (`NBD_OPT_EXPORT_NAME`'s whole payload).
pub fn parse_export_name(payload: &[u8]) -> Result<String, NbdError> {
    if payload.len() > STRING_BYTES_MAX {
        return Err(NbdError::BadOption("export name too long"));
    }
    let name = std::str::from_utf8(payload).map_err(|_| NbdError::BadOption("not UTF-8"))?;
    if name.contains('\0') {
        return Err(NbdError::BadOption("export name holds a NUL"));
    }
    Ok(name.to_owned())
}

/// One option reply.
pub fn option_reply(option: u32, reply: u32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(20 + data.len());
    out.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&reply.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    out
}

/// `NBD_REP_SERVER`'s data for `NBD_OPT_LIST`.
pub fn server_entry(name: &str) -> Vec<u8> {
    let mut data = (name.len() as u32).to_be_bytes().to_vec();
    data.extend_from_slice(name.as_bytes());
    data
}

/// `NBD_REP_INFO` data: `NBD_INFO_EXPORT`.
pub fn info_export(length_bytes: u64, transmission_flags: u16) -> Vec<u8> {
    let mut data = INFO_EXPORT.to_be_bytes().to_vec();
    data.extend_from_slice(&length_bytes.to_be_bytes());
    data.extend_from_slice(&transmission_flags.to_be_bytes());
    data
}

/// `NBD_REP_INFO` data: `NBD_INFO_BLOCK_SIZE`.
pub fn info_block_size(minimum: u32, preferred: u32, maximum: u32) -> Vec<u8> {
    let mut data = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
    for v in [minimum, preferred, maximum] {
        data.extend_from_slice(&v.to_be_bytes());
    }
    data
}

/// The answer to `NBD_OPT_EXPORT_NAME`: size, transmission flags, and 124 zeroes unless the
/// client negotiated `NBD_FLAG_C_NO_ZEROES`.
pub fn export_name_reply(length_bytes: u64, transmission_flags: u16, no_zeroes: bool) -> Vec<u8> {
    let mut out = length_bytes.to_be_bytes().to_vec();
    out.extend_from_slice(&transmission_flags.to_be_bytes());
    if !no_zeroes {
        out.extend_from_slice(&[0u8; 124]);
    }
    out
}

/// A transmission command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Read,
    Write,
    Disc,
    Flush,
    Trim,
    WriteZeroes,
    /// A command this server does not implement: answered `EINVAL`.
    Other(u16),
}

impl Command {
    fn from_u16(v: u16) -> Command {
        match v {
            0 => Command::Read,
            1 => Command::Write,
            2 => Command::Disc,
            3 => Command::Flush,
            4 => Command::Trim,
            6 => Command::WriteZeroes,
            other => Command::Other(other),
        }
    }

    pub fn to_u16(self) -> u16 {
        match self {
            Command::Read => 0,
            Command::Write => 1,
            Command::Disc => 2,
            Command::Flush => 3,
            Command::Trim => 4,
            Command::WriteZeroes => 6,
            Command::Other(v) => v,
        }
    }
}

/// A request header. A write's `length` bytes of data follow it on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub command: Command,
    pub handle: u64,
    pub offset: u64,
    pub length: u32,
}

/// Parses a request header; a bad magic number means the stream is lost (close it).
pub fn parse_request(bytes: [u8; REQUEST_HEADER_BYTES]) -> Result<Request, NbdError> {
    let magic = u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes"));
    if magic != REQUEST_MAGIC {
        return Err(NbdError::BadMagic(magic as u64));
    }
    Ok(Request {
        flags: u16::from_be_bytes([bytes[4], bytes[5]]),
        command: Command::from_u16(u16::from_be_bytes([bytes[6], bytes[7]])),
        handle: u64::from_be_bytes(bytes[8..16].try_into().expect("8 bytes")),
        offset: u64::from_be_bytes(bytes[16..24].try_into().expect("8 bytes")),
        length: u32::from_be_bytes(bytes[24..28].try_into().expect("4 bytes")),
    })
}

pub fn encode_request(r: &Request) -> [u8; REQUEST_HEADER_BYTES] {
    let mut out = [0u8; REQUEST_HEADER_BYTES];
    out[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
    out[4..6].copy_from_slice(&r.flags.to_be_bytes());
    out[6..8].copy_from_slice(&r.command.to_u16().to_be_bytes());
    out[8..16].copy_from_slice(&r.handle.to_be_bytes());
    out[16..24].copy_from_slice(&r.offset.to_be_bytes());
    out[24..28].copy_from_slice(&r.length.to_be_bytes());
    out
}

/// What an export accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub length_bytes: u64,
    /// Offsets and lengths of reads, writes, trims and write-zeroes are multiples of this.
    pub minimum_block: u32,
    /// The largest read or write payload.
    pub maximum_payload: u32,
    pub read_only: bool,
}

/// Checks a request against the export: `Err(error value)` for the reply. A write refused here
/// still has its payload on the wire, which the caller must read and discard (unless longer
/// than `maximum_payload`, see [`must_disconnect`]).
pub fn check_request(r: &Request, limits: &Limits) -> Result<(), u32> {
    let known_flags = match r.command {
        Command::Write | Command::Trim => CMD_FLAG_FUA,
        Command::WriteZeroes => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
        Command::Read => CMD_FLAG_DF | CMD_FLAG_FUA,
        Command::Flush | Command::Disc => CMD_FLAG_FUA,
        Command::Other(_) => return Err(EINVAL),
    };
    if r.flags & !known_flags != 0 {
        return Err(EINVAL);
    }
    match r.command {
        Command::Disc | Command::Flush => Ok(()),
        Command::Read | Command::Write | Command::Trim | Command::WriteZeroes => {
            let writes = !matches!(r.command, Command::Read);
            if writes && limits.read_only {
                return Err(EPERM);
            }
            if r.length == 0 {
                return Err(EINVAL);
            }
            let end = r.offset.checked_add(r.length as u64);
            if end.is_none_or(|e| e > limits.length_bytes) {
                return Err(
                    if matches!(r.command, Command::Write | Command::WriteZeroes) {
                        ENOSPC
                    } else {
                        EINVAL
                    },
                );
            }
            let block = limits.minimum_block.max(1) as u64;
            if !r.offset.is_multiple_of(block) || !(r.length as u64).is_multiple_of(block) {
                return Err(EINVAL);
            }
            if matches!(r.command, Command::Read | Command::Write)
                && r.length > limits.maximum_payload
            {
                return Err(if r.command == Command::Read {
                    EOVERFLOW
                } else {
                    EINVAL
                });
            }
            Ok(())
        }
        Command::Other(_) => Err(EINVAL),
    }
}

/// A write whose payload is too long to read and discard safely: the connection must close.
pub fn must_disconnect(r: &Request, limits: &Limits) -> bool {
    r.command == Command::Write && r.length > limits.maximum_payload
}

/// A simple reply's header (a successful read's data follows it).
pub fn simple_reply(handle: u64, error: u32) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    out[4..8].copy_from_slice(&error.to_be_bytes());
    out[8..].copy_from_slice(&handle.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: Limits = Limits {
        length_bytes: 1 << 20,
        minimum_block: 512,
        maximum_payload: 32 << 20,
        read_only: false,
    };

    fn request(command: Command, flags: u16, offset: u64, length: u32) -> Request {
        Request {
            flags,
            command,
            handle: 7,
            offset,
            length,
        }
    }

    #[test]
    fn greeting_and_flags_follow_the_specification() {
        let g = greeting();
        assert_eq!(&g[..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        assert_eq!(u16::from_be_bytes([g[16], g[17]]), 3);
        assert_eq!(
            parse_client_flags([0, 0, 0, 3]),
            Ok(ClientFlags {
                fixed_newstyle: true,
                no_zeroes: true
            })
        );
        assert_eq!(
            parse_client_flags([0, 0, 0, 4]),
            Err(NbdError::UnknownClientFlags(4))
        );
    }

    #[test]
    fn options_parse_and_malformed_ones_are_typed_errors() {
        let mut h = IHAVEOPT.to_be_bytes().to_vec();
        h.extend_from_slice(&OPT_GO.to_be_bytes());
        h.extend_from_slice(&10u32.to_be_bytes());
        let header = parse_option_header(h.clone().try_into().unwrap()).unwrap();
        assert_eq!(
            header,
            OptionHeader {
                option: OPT_GO,
                length: 10
            }
        );
        h[12..16].copy_from_slice(&(OPTION_BYTES_MAX + 1).to_be_bytes());
        assert!(matches!(
            parse_option_header(h.try_into().unwrap()),
            Err(NbdError::OptionTooLong(_))
        ));
        // Name "ab", two information requests.
        let go = [0, 0, 0, 2, b'a', b'b', 0, 2, 0, 0, 0, 3];
        assert_eq!(
            parse_info_request(&go),
            Ok(InfoRequest {
                name: "ab".into(),
                requests: vec![INFO_EXPORT, INFO_BLOCK_SIZE]
            })
        );
        for bad in [
            &go[..5],
            &go[..11],
            &[0, 0, 0, 200, b'a', 0, 0][..],
            &[0, 0, 0, 1, 0xff, 0, 0][..],
        ] {
            assert!(
                matches!(parse_info_request(bad), Err(NbdError::BadOption(_))),
                "{bad:?}"
            );
        }
        assert!(parse_export_name(b"a\0b").is_err());
        assert_eq!(parse_export_name(b"").unwrap(), "");
    }

    #[test]
    fn replies_have_the_documented_layout() {
        let r = option_reply(OPT_GO, REP_INFO, &info_export(1 << 30, FLAG_HAS_FLAGS));
        assert_eq!(r.len(), 20 + 12);
        assert_eq!(&r[..8], &OPTION_REPLY_MAGIC.to_be_bytes());
        assert_eq!(u32::from_be_bytes(r[16..20].try_into().unwrap()), 12);
        assert_eq!(info_block_size(512, 4096, 32 << 20).len(), 14);
        assert_eq!(export_name_reply(4096, 1, false).len(), 134);
        assert_eq!(export_name_reply(4096, 1, true).len(), 10);
        let s = simple_reply(0x0102_0304_0506_0708, EINVAL);
        assert_eq!(&s[..4], &SIMPLE_REPLY_MAGIC.to_be_bytes());
        assert_eq!(u32::from_be_bytes(s[4..8].try_into().unwrap()), 22);
    }

    #[test]
    fn bad_requests_get_the_protocols_errors() {
        let ok = |c, f, o, l| check_request(&request(c, f, o, l), &LIMITS);
        assert_eq!(ok(Command::Read, 0, 0, 4096), Ok(()));
        assert_eq!(ok(Command::Write, CMD_FLAG_FUA, 4096, 512), Ok(()));
        assert_eq!(ok(Command::Flush, 0, 0, 0), Ok(()));
        assert_eq!(ok(Command::Write, 0, (1 << 20) - 512, 1024), Err(ENOSPC));
        assert_eq!(ok(Command::Read, 0, 1 << 20, 512), Err(EINVAL));
        assert_eq!(ok(Command::Read, 0, u64::MAX - 10, 512), Err(EINVAL));
        assert_eq!(ok(Command::Read, 0, 100, 512), Err(EINVAL), "misaligned");
        assert_eq!(ok(Command::Read, 0, 0, 0), Err(EINVAL));
        assert_eq!(ok(Command::Other(42), 0, 0, 512), Err(EINVAL));
        assert_eq!(
            ok(Command::Read, 1 << 9, 0, 512),
            Err(EINVAL),
            "unknown flag"
        );
        let ro = Limits {
            read_only: true,
            ..LIMITS
        };
        assert_eq!(
            check_request(&request(Command::Trim, 0, 0, 512), &ro),
            Err(EPERM)
        );
        let big = request(Command::Write, 0, 0, (32 << 20) + 512);
        assert!(must_disconnect(&big, &LIMITS));
        assert!(!must_disconnect(
            &request(Command::Write, 0, 0, 512),
            &LIMITS
        ));
    }

    proptest! {
        #[test]
        fn requests_round_trip(flags: u16, command in 0u16..10, handle: u64, offset: u64, length: u32) {
            let r = Request { flags, command: Command::from_u16(command), handle, offset, length };
            prop_assert_eq!(parse_request(encode_request(&r)), Ok(r));
        }

        /// No input makes a parser panic; every check answers.
        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_info_request(&bytes);
            let _ = parse_export_name(&bytes);
            let mut header = [0u8; REQUEST_HEADER_BYTES];
            for (h, b) in header.iter_mut().zip(&bytes) { *h = *b; }
            if let Ok(r) = parse_request(header) {
                let _ = check_request(&r, &LIMITS);
            }
            let mut option = [0u8; OPTION_HEADER_BYTES];
            for (h, b) in option.iter_mut().zip(&bytes) { *h = *b; }
            let _ = parse_option_header(option);
        }
    }
}
