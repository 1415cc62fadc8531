//! The option haggling of the fixed newstyle handshake, sans I/O: given one option's header
//! and payload, what the server writes and does next — including `NBD_OPT_STARTTLS` and what
//! a port that requires TLS answers before it (the NetworkBlockDevice/nbd repository's
//! `doc/proto.md`, "TLS support").
//!
//! The driver reads the greeting's answer, then loops: read an option, hand it to
//! [`Haggle::option`], write the bytes of the [`Step`] it returns and do what the step says.
//! After [`Step::StartTls`] the driver runs the TLS handshake over the same connection, calls
//! [`Haggle::tls_started`], and haggling goes on inside TLS (the greeting is not repeated).

use super::*;

/// Whether a port offers TLS, and whether it insists on it (`--tls off|allow|require`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsPolicy {
    /// STARTTLS is answered "unsupported".
    #[default]
    Off,
    /// Clients may start TLS or not.
    Allow,
    /// Before TLS, every option but STARTTLS and ABORT is refused with
    /// `NBD_REP_ERR_TLS_REQD`, and `NBD_OPT_EXPORT_NAME` closes the connection: a client
    /// without the key learns no export name and reaches no data.
    Require,
}

impl std::str::FromStr for TlsPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<TlsPolicy, String> {
        match s {
            "off" => Ok(TlsPolicy::Off),
            "allow" => Ok(TlsPolicy::Allow),
            "require" => Ok(TlsPolicy::Require),
            _ => Err(format!("{s:?}: expected off, allow or require")),
        }
    }
}

impl std::fmt::Display for TlsPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TlsPolicy::Off => "off",
            TlsPolicy::Allow => "allow",
            TlsPolicy::Require => "require",
        })
    }
}

/// What the export table says about the name a client asks for.
pub struct Found<T> {
    pub export: T,
    pub length_bytes: u64,
}

/// Why a handshake ends without an export, the connection closed without a reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("unknown export {0:?}")]
    UnknownExport(String),
    #[error("NBD_OPT_EXPORT_NAME before TLS on a port that requires TLS")]
    TlsRequired,
    #[error("{0}")]
    BadOption(NbdError),
}

/// What the driver does with one option.
#[derive(Debug)]
pub enum Step<T> {
    /// Write these bytes and read the next option.
    Reply(Vec<u8>),
    /// Write these bytes (the ACK), then run the TLS handshake as the server; close if it
    /// fails.
    StartTls(Vec<u8>),
    /// Write these bytes; transmission begins on `export`.
    Chosen { reply: Vec<u8>, export: T },
    /// Write these bytes and close: the client aborted.
    Abort(Vec<u8>),
    /// Close without writing: the option cannot be answered with an error.
    Close(Refusal),
}

/// The export's block sizes as advertised in `NBD_INFO_BLOCK_SIZE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSizes {
    pub minimum: u32,
    pub preferred: u32,
    pub maximum: u32,
}

/// One connection's haggling state.
#[derive(Clone, Debug)]
pub struct Haggle {
    policy: TlsPolicy,
    tls: bool,
    client: ClientFlags,
    transmission_flags: u16,
    block: BlockSizes,
}

impl Haggle {
    pub fn new(
        policy: TlsPolicy,
        client: ClientFlags,
        transmission_flags: u16,
        block: BlockSizes,
    ) -> Haggle {
        Haggle {
            policy,
            tls: false,
            client,
            transmission_flags,
            block,
        }
    }

    /// The TLS handshake that followed [`Step::StartTls`] succeeded.
    pub fn tls_started(&mut self) {
        debug_assert!(
            self.policy != TlsPolicy::Off,
            "TLS started on a port without it"
        );
        self.tls = true;
    }

    pub fn tls_active(&self) -> bool {
        self.tls
    }

    /// Whether this connection may learn anything about exports yet.
    fn may_proceed(&self) -> bool {
        self.tls || self.policy != TlsPolicy::Require
    }

    /// What to do with one option: `lookup` finds an export by name (the empty name is the
    /// default export, if any), `names` lists them for `NBD_OPT_LIST`. Neither is called
    /// before TLS on a port that requires it.
    pub fn option<T>(
        &mut self,
        header: OptionHeader,
        payload: &[u8],
        lookup: impl FnOnce(&str) -> Option<Found<T>>,
        names: impl FnOnce() -> Vec<String>,
    ) -> Step<T> {
        let option = header.option;
        let reply = |kind: u32, data: &[u8]| option_reply(option, kind, data);
        match option {
            OPT_ABORT => return Step::Abort(reply(REP_ACK, &[])),
            OPT_STARTTLS => {
                return if self.policy == TlsPolicy::Off {
                    Step::Reply(reply(REP_ERR_UNSUP, b"TLS is not offered on this port"))
                } else if self.tls {
                    Step::Reply(reply(REP_ERR_INVALID, b"TLS is already active"))
                } else if !payload.is_empty() {
                    Step::Reply(reply(REP_ERR_INVALID, b"STARTTLS takes no data"))
                } else {
                    Step::StartTls(reply(REP_ACK, &[]))
                };
            }
            OPT_EXPORT_NAME if !self.may_proceed() => return Step::Close(Refusal::TlsRequired),
            _ if !self.may_proceed() => {
                return Step::Reply(reply(REP_ERR_TLS_REQD, b"this port requires TLS"))
            }
            _ => {}
        }
        match option {
            OPT_EXPORT_NAME => {
                let name = match parse_export_name(payload) {
                    Ok(name) => name,
                    Err(e) => return Step::Close(Refusal::BadOption(e)),
                };
                match lookup(&name) {
                    Some(found) => Step::Chosen {
                        reply: export_name_reply(
                            found.length_bytes,
                            self.transmission_flags,
                            self.client.no_zeroes,
                        ),
                        export: found.export,
                    },
                    None => Step::Close(Refusal::UnknownExport(name)),
                }
            }
            OPT_LIST if !payload.is_empty() => Step::Reply(reply(REP_ERR_INVALID, &[])),
            OPT_LIST => {
                let mut out = Vec::new();
                for name in names() {
                    out.extend(reply(REP_SERVER, &server_entry(&name)));
                }
                out.extend(reply(REP_ACK, &[]));
                Step::Reply(out)
            }
            OPT_INFO | OPT_GO => {
                let request = match parse_info_request(payload) {
                    Ok(r) => r,
                    Err(e) => return Step::Reply(reply(REP_ERR_INVALID, e.to_string().as_bytes())),
                };
                let Some(found) = lookup(&request.name) else {
                    let msg = format!("no export named {:?}", request.name);
                    return Step::Reply(reply(REP_ERR_UNKNOWN, msg.as_bytes()));
                };
                let mut out = reply(
                    REP_INFO,
                    &info_export(found.length_bytes, self.transmission_flags),
                );
                let b = self.block;
                out.extend(reply(
                    REP_INFO,
                    &info_block_size(b.minimum, b.preferred, b.maximum),
                ));
                out.extend(reply(REP_ACK, &[]));
                if option == OPT_GO {
                    Step::Chosen {
                        reply: out,
                        export: found.export,
                    }
                } else {
                    Step::Reply(out)
                }
            }
            // STRUCTURED_REPLY and anything else: not offered here.
            _ => Step::Reply(reply(REP_ERR_UNSUP, &[])),
        }
    }
}

/// An option split off the front of a byte string: its header, its payload, the bytes after.
pub type SplitOption<'a> = (OptionHeader, &'a [u8], &'a [u8]);

/// Parses a whole option (header and payload) from the front of `bytes`, for tests and fuzz
/// targets that drive [`Haggle`] from a byte string: the option and the bytes after it, or
/// `None` when `bytes` holds less than one option.
pub fn split_option(bytes: &[u8]) -> Option<Result<SplitOption<'_>, NbdError>> {
    let header: [u8; OPTION_HEADER_BYTES] = bytes.get(..OPTION_HEADER_BYTES)?.try_into().ok()?;
    let header = match parse_option_header(header) {
        Ok(h) => h,
        Err(e) => return Some(Err(e)),
    };
    let end = OPTION_HEADER_BYTES + header.length as usize;
    let payload = bytes.get(OPTION_HEADER_BYTES..end)?;
    Some(Ok((header, payload, &bytes[end..])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BLOCK: BlockSizes = BlockSizes {
        minimum: 512,
        preferred: 4096,
        maximum: 32 << 20,
    };

    fn haggle(policy: TlsPolicy) -> Haggle {
        let client = ClientFlags {
            fixed_newstyle: true,
            no_zeroes: true,
        };
        Haggle::new(policy, client, FLAG_HAS_FLAGS, BLOCK)
    }

    fn header(option: u32, payload: &[u8]) -> OptionHeader {
        OptionHeader {
            option,
            length: payload.len() as u32,
        }
    }

    fn go_payload(name: &str) -> Vec<u8> {
        let mut p = (name.len() as u32).to_be_bytes().to_vec();
        p.extend_from_slice(name.as_bytes());
        p.extend_from_slice(&0u16.to_be_bytes());
        p
    }

    /// Runs one option against a table with one export, "disk", of 1 MiB; also says whether
    /// the table was consulted.
    fn run(h: &mut Haggle, option: u32, payload: &[u8]) -> (Step<&'static str>, bool) {
        let consulted = std::cell::Cell::new(false);
        let step = h.option(
            header(option, payload),
            payload,
            |name| {
                consulted.set(true);
                (name == "disk" || name.is_empty()).then_some(Found {
                    export: "disk",
                    length_bytes: 1 << 20,
                })
            },
            || {
                consulted.set(true);
                vec!["disk".to_owned()]
            },
        );
        (step, consulted.get())
    }

    /// The reply type of the first reply in `bytes`.
    fn kind(bytes: &[u8]) -> u32 {
        assert_eq!(&bytes[..8], &OPTION_REPLY_MAGIC.to_be_bytes());
        u32::from_be_bytes(bytes[12..16].try_into().unwrap())
    }

    #[test]
    fn a_port_that_requires_tls_tells_nothing_before_it() {
        let mut h = haggle(TlsPolicy::Require);
        for option in [OPT_LIST, OPT_INFO, OPT_GO, OPT_STRUCTURED_REPLY, 99] {
            let payload = if option == OPT_LIST {
                vec![]
            } else {
                go_payload("disk")
            };
            let (step, consulted) = run(&mut h, option, &payload);
            match step {
                Step::Reply(bytes) => assert_eq!(kind(&bytes), REP_ERR_TLS_REQD, "{option}"),
                other => panic!("option {option}: {other:?}"),
            }
            assert!(!consulted, "option {option} looked up exports before TLS");
        }
        let (step, consulted) = run(&mut h, OPT_EXPORT_NAME, b"disk");
        assert!(
            matches!(step, Step::Close(Refusal::TlsRequired)),
            "{step:?}"
        );
        assert!(!consulted);
        assert!(!h.tls_active());
    }

    #[test]
    fn after_starttls_the_same_options_choose_the_export() {
        let mut h = haggle(TlsPolicy::Require);
        let (step, _) = run(&mut h, OPT_STARTTLS, &[]);
        match step {
            Step::StartTls(bytes) => assert_eq!(kind(&bytes), REP_ACK),
            other => panic!("{other:?}"),
        }
        h.tls_started();
        let (step, _) = run(&mut h, OPT_STARTTLS, &[]);
        match step {
            Step::Reply(bytes) => assert_eq!(kind(&bytes), REP_ERR_INVALID, "TLS twice"),
            other => panic!("{other:?}"),
        }
        let (step, _) = run(&mut h, OPT_LIST, &[]);
        match step {
            Step::Reply(bytes) => assert_eq!(kind(&bytes), REP_SERVER),
            other => panic!("{other:?}"),
        }
        let (step, consulted) = run(&mut h, OPT_GO, &go_payload("disk"));
        assert!(consulted);
        match step {
            Step::Chosen { reply, export } => {
                assert_eq!(export, "disk");
                assert_eq!(kind(&reply), REP_INFO);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn starttls_is_unsupported_when_off_and_optional_when_allowed() {
        let mut off = haggle(TlsPolicy::Off);
        match run(&mut off, OPT_STARTTLS, &[]).0 {
            Step::Reply(bytes) => assert_eq!(kind(&bytes), REP_ERR_UNSUP),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            run(&mut off, OPT_GO, &go_payload("disk")).0,
            Step::Chosen { .. }
        ));
        let mut allow = haggle(TlsPolicy::Allow);
        match run(&mut allow, OPT_STARTTLS, b"x").0 {
            Step::Reply(bytes) => assert_eq!(kind(&bytes), REP_ERR_INVALID, "data on STARTTLS"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            run(&mut allow, OPT_EXPORT_NAME, b"disk").0,
            Step::Chosen { .. }
        ));
        let mut allow = haggle(TlsPolicy::Allow);
        assert!(matches!(
            run(&mut allow, OPT_STARTTLS, &[]).0,
            Step::StartTls(_)
        ));
    }

    #[test]
    fn unknown_exports_and_bad_payloads_are_answered_or_closed() {
        let mut h = haggle(TlsPolicy::Off);
        match run(&mut h, OPT_GO, &go_payload("other")).0 {
            Step::Reply(bytes) => assert_eq!(kind(&bytes), REP_ERR_UNKNOWN),
            other => panic!("{other:?}"),
        }
        match run(&mut h, OPT_INFO, &[0, 0]).0 {
            Step::Reply(bytes) => assert_eq!(kind(&bytes), REP_ERR_INVALID),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            run(&mut h, OPT_EXPORT_NAME, b"other").0,
            Step::Close(Refusal::UnknownExport(_))
        ));
        assert!(matches!(
            run(&mut h, OPT_EXPORT_NAME, b"a\0b").0,
            Step::Close(Refusal::BadOption(_))
        ));
        assert!(matches!(run(&mut h, OPT_ABORT, &[]).0, Step::Abort(_)));
    }

    proptest! {
        /// Whatever options a client sends without STARTTLS, a port that requires TLS never
        /// chooses an export nor consults the table.
        #[test]
        fn no_option_sequence_reaches_an_export_without_tls(
            options in proptest::collection::vec(
                (prop_oneof![Just(OPT_EXPORT_NAME), Just(OPT_LIST), Just(OPT_INFO),
                             Just(OPT_GO), Just(OPT_STRUCTURED_REPLY), any::<u32>()],
                 proptest::collection::vec(any::<u8>(), 0..24)),
                1..20),
        ) {
            let mut h = haggle(TlsPolicy::Require);
            for (option, payload) in options {
                if option == OPT_STARTTLS || option == OPT_ABORT {
                    continue;
                }
                let (step, consulted) = run(&mut h, option, &payload);
                prop_assert!(!consulted);
                let reached = matches!(step, Step::Chosen { .. } | Step::StartTls(_));
                prop_assert!(!reached, "{:?}", step);
            }
        }
    }

    #[test]
    fn split_option_takes_whole_options_only() {
        let mut bytes = IHAVEOPT.to_be_bytes().to_vec();
        bytes.extend_from_slice(&OPT_EXPORT_NAME.to_be_bytes());
        bytes.extend_from_slice(&4u32.to_be_bytes());
        assert!(split_option(&bytes).is_none(), "payload missing");
        bytes.extend_from_slice(b"diskrest");
        let (h, payload, rest) = split_option(&bytes).unwrap().unwrap();
        assert_eq!(
            (h.option, payload, rest),
            (OPT_EXPORT_NAME, &b"disk"[..], &b"rest"[..])
        );
        bytes[0] ^= 1;
        assert!(matches!(
            split_option(&bytes),
            Some(Err(NbdError::BadMagic(_)))
        ));
    }
}
