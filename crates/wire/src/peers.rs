//! A store's peer bindings file: which authenticated peer owns each client id. A store that
//! authenticates its clients (`store serve --cluster-key`) binds a client id to the first peer
//! that uses it and answers any other peer's request for that id with `Denied`, so a forged id
//! reads nothing. One binding per line, appended (and made durable) before the request that
//! made it is served:
//!
//! ```text
//! 7 volume-a
//! 1234567890123 logger-r2
//! ```
//!
//! The client id is decimal; the identity is the rest of the line (a PSK identity or a
//! certificate's common name: non-empty, at most [`IDENTITY_BYTES_MAX`] bytes, no line break).
//! A final line without its line break is a binding whose append did not complete: it was
//! never in force (its request was not served), and [`parse`] leaves it out and says where the
//! complete lines end. Anything else — a bad number, an empty identity, an id bound twice, a
//! file over [`FILE_BYTES_MAX`] — is refused with its line.

use std::collections::BTreeMap;

/// The longest identity accepted.
pub const IDENTITY_BYTES_MAX: usize = 256;
/// A bindings file larger than this is refused before it is parsed (about 60,000 bindings).
pub const FILE_BYTES_MAX: usize = 16 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeersError {
    #[error("the bindings file is {0} bytes, over the {FILE_BYTES_MAX}-byte limit")]
    TooLarge(usize),
    #[error("line {line}: not UTF-8")]
    NotText { line: usize },
    #[error("line {line}: expected CLIENT_ID IDENTITY")]
    NoSeparator { line: usize },
    #[error("line {line}: {text:?} is not a client id")]
    BadClient { line: usize, text: String },
    #[error("line {line}: empty identity")]
    EmptyIdentity { line: usize },
    #[error("line {line}: identity longer than {IDENTITY_BYTES_MAX} bytes")]
    LongIdentity { line: usize },
    #[error("line {line}: client {client} bound again (first on line {first})")]
    Duplicate {
        line: usize,
        first: usize,
        client: u64,
    },
}

/// The bindings of a file, and the length of its complete lines (what a store keeps of it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bindings {
    pub by_client: BTreeMap<u64, String>,
    pub complete_bytes: usize,
}

/// Whether `identity` may be bound (and written as a line).
pub fn identity_ok(identity: &str) -> bool {
    !identity.is_empty() && identity.len() <= IDENTITY_BYTES_MAX && !identity.contains(['\n', '\r'])
}

/// The line that binds `client` to `identity` (see [`identity_ok`]).
pub fn line(client: u64, identity: &str) -> String {
    debug_assert!(identity_ok(identity));
    format!("{client} {identity}\n")
}

/// Reads a bindings file.
pub fn parse(bytes: &[u8]) -> Result<Bindings, PeersError> {
    if bytes.len() > FILE_BYTES_MAX {
        return Err(PeersError::TooLarge(bytes.len()));
    }
    let complete_bytes = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut by_client = BTreeMap::new();
    let mut first_line: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, raw) in bytes[..complete_bytes].split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        if raw.is_empty() {
            continue;
        }
        let text = std::str::from_utf8(raw).map_err(|_| PeersError::NotText { line })?;
        let (client, identity) = text
            .split_once(' ')
            .ok_or(PeersError::NoSeparator { line })?;
        let client: u64 = client
            .parse()
            .ok()
            .filter(|_| client.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| PeersError::BadClient {
                line,
                text: client.chars().take(32).collect(),
            })?;
        if identity.is_empty() {
            return Err(PeersError::EmptyIdentity { line });
        }
        if identity.len() > IDENTITY_BYTES_MAX || identity.contains('\r') {
            return Err(PeersError::LongIdentity { line });
        }
        if let Some(&first) = first_line.get(&client) {
            return Err(PeersError::Duplicate {
                line,
                first,
                client,
            });
        }
        first_line.insert(client, line);
        by_client.insert(client, identity.to_owned());
    }
    Ok(Bindings {
        by_client,
        complete_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_and_a_torn_last_line_is_left_out() {
        let mut file = line(7, "volume-a") + &line(u64::MAX, "logger r2");
        let b = parse(file.as_bytes()).unwrap();
        assert_eq!(b.by_client[&7], "volume-a");
        assert_eq!(b.by_client[&u64::MAX], "logger r2");
        assert_eq!(b.complete_bytes, file.len());
        let whole = file.len();
        file.push_str("9 volu");
        let b = parse(file.as_bytes()).unwrap();
        assert_eq!(b.by_client.len(), 2);
        assert_eq!(b.complete_bytes, whole);
        assert_eq!(parse(b"").unwrap(), Bindings::default());
    }

    #[test]
    fn damaged_lines_are_refused_with_their_number() {
        for (text, want) in [
            (&b"7volume\n"[..], PeersError::NoSeparator { line: 1 }),
            (
                b"x7 a\n",
                PeersError::BadClient {
                    line: 1,
                    text: "x7".into(),
                },
            ),
            (
                b"+7 a\n",
                PeersError::BadClient {
                    line: 1,
                    text: "+7".into(),
                },
            ),
            (b"\n7 \n", PeersError::EmptyIdentity { line: 2 }),
            (b"7 a\xff\n", PeersError::NotText { line: 1 }),
            (
                b"7 a\n7 b\n",
                PeersError::Duplicate {
                    line: 2,
                    first: 1,
                    client: 7,
                },
            ),
        ] {
            assert_eq!(
                parse(text),
                Err(want),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
        let long = format!("1 {}\n", "a".repeat(IDENTITY_BYTES_MAX + 1));
        assert_eq!(
            parse(long.as_bytes()),
            Err(PeersError::LongIdentity { line: 1 })
        );
        assert!(!identity_ok("") && !identity_ok("a\nb") && identity_ok("a b"));
    }
}
