//! Pre-shared keys files, in the format GnuTLS's `psktool` writes and nbdkit, qemu-nbd and
//! libnbd read (`tls-psk-file`): one `identity:hexkey` per line.
//!
//! ```text
//! alice:8cd2a4b1c8e5f30e2d9a6b7c4e1f0a3d
//! bob:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978
//! ```
//!
//! The identity is any text without `:` or a line break (GnuTLS compares it byte for byte);
//! the key is an even number of hex digits, at least [`KEY_BYTES_MIN`] bytes. Blank lines are
//! skipped, and a final line without a line break is taken. Anything else — a line without
//! `:`, an empty identity, a bad hex digit, a short key, an identity given twice, a file
//! over [`FILE_BYTES_MAX`] — is refused with the line it is on, so a damaged keys file never
//! starts a daemon with fewer keys than its operator wrote.

use std::collections::BTreeMap;

/// The shortest key accepted: 128 bits (psktool's default is 256).
pub const KEY_BYTES_MIN: usize = 16;
/// The longest key accepted (GnuTLS's own limit on a PSK is 64 bytes on the wire in TLS 1.2;
/// longer keys are refused here rather than cut).
pub const KEY_BYTES_MAX: usize = 64;
/// The longest identity accepted (RFC 4279: up to 2^16 − 1 bytes; kept short here).
pub const IDENTITY_BYTES_MAX: usize = 128;
/// A keys file larger than this is refused before it is parsed.
pub const FILE_BYTES_MAX: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PskError {
    #[error("the keys file is {0} bytes, over the {FILE_BYTES_MAX}-byte limit")]
    TooLarge(usize),
    #[error("line {line}: not UTF-8")]
    NotText { line: usize },
    #[error("line {line}: expected identity:hexkey")]
    NoSeparator { line: usize },
    #[error("line {line}: empty identity")]
    EmptyIdentity { line: usize },
    #[error("line {line}: identity longer than {IDENTITY_BYTES_MAX} bytes")]
    LongIdentity { line: usize },
    #[error("line {line}: the key is not an even number of hex digits")]
    BadHex { line: usize },
    #[error("line {line}: a {bytes}-byte key; keys are {KEY_BYTES_MIN} to {KEY_BYTES_MAX} bytes")]
    KeyLength { line: usize, bytes: usize },
    #[error("line {line}: identity {identity:?} given again (first on line {first})")]
    Duplicate {
        line: usize,
        first: usize,
        identity: String,
    },
    #[error("the keys file holds no key")]
    Empty,
}

/// The keys of a keys file, by identity.
#[derive(Clone, PartialEq, Eq)]
pub struct PskKeys {
    keys: BTreeMap<String, Vec<u8>>,
}

impl std::fmt::Debug for PskKeys {
    /// Identities only: keys never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PskKeys")
            .field("identities", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl PskKeys {
    /// Parses a whole keys file.
    pub fn parse(bytes: &[u8]) -> Result<PskKeys, PskError> {
        if bytes.len() > FILE_BYTES_MAX {
            return Err(PskError::TooLarge(bytes.len()));
        }
        let mut keys = BTreeMap::new();
        let mut lines_of: BTreeMap<String, usize> = BTreeMap::new();
        for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = i + 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            let text = std::str::from_utf8(raw).map_err(|_| PskError::NotText { line })?;
            let (identity, hex) = text.split_once(':').ok_or(PskError::NoSeparator { line })?;
            if identity.is_empty() {
                return Err(PskError::EmptyIdentity { line });
            }
            if identity.len() > IDENTITY_BYTES_MAX {
                return Err(PskError::LongIdentity { line });
            }
            let key = decode_hex(hex.trim_end()).ok_or(PskError::BadHex { line })?;
            if !(KEY_BYTES_MIN..=KEY_BYTES_MAX).contains(&key.len()) {
                return Err(PskError::KeyLength {
                    line,
                    bytes: key.len(),
                });
            }
            if let Some(&first) = lines_of.get(identity) {
                return Err(PskError::Duplicate {
                    line,
                    first,
                    identity: identity.to_string(),
                });
            }
            lines_of.insert(identity.to_string(), line);
            keys.insert(identity.to_string(), key);
        }
        if keys.is_empty() {
            return Err(PskError::Empty);
        }
        Ok(PskKeys { keys })
    }

    /// The key of `identity`, if the file has one.
    pub fn get(&self, identity: &[u8]) -> Option<&[u8]> {
        let identity = std::str::from_utf8(identity).ok()?;
        self.keys.get(identity).map(Vec::as_slice)
    }

    /// The identities, in order.
    pub fn identities(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The file that parses back to these keys (one line per identity, lower-case hex).
    pub fn to_file(&self) -> String {
        let mut out = String::new();
        for (identity, key) in &self.keys {
            out.push_str(identity);
            out.push(':');
            for b in key {
                out.push_str(&format!("{b:02x}"));
            }
            out.push('\n');
        }
        out
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if digits.is_empty() || !digits.len().is_multiple_of(2) {
        return None;
    }
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    digits
        .chunks(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: &str = "alice:8cd2a4b1c8e5f30e2d9a6b7c4e1f0a3d";

    #[test]
    fn psktool_lines_parse_and_write_back() {
        let file = format!(
            "{ALICE}\n\nbob:{}\r\ncarol:{}",
            "0F".repeat(32),
            "ab".repeat(16)
        );
        let keys = PskKeys::parse(file.as_bytes()).unwrap();
        assert_eq!(keys.len(), 3);
        assert_eq!(
            keys.identities().collect::<Vec<_>>(),
            ["alice", "bob", "carol"]
        );
        assert_eq!(keys.get(b"bob"), Some(&[0x0f; 32][..]));
        assert_eq!(keys.get(b"alice").unwrap()[..2], [0x8c, 0xd2]);
        assert_eq!(keys.get(b"dave"), None);
        assert_eq!(PskKeys::parse(keys.to_file().as_bytes()).unwrap(), keys);
        // The key never shows in a debug print.
        assert!(!format!("{keys:?}").contains("8cd2"));
    }

    #[test]
    fn damaged_files_are_refused_with_their_line() {
        let cases: Vec<(String, PskError)> = vec![
            ("".into(), PskError::Empty),
            ("\n \n".into(), PskError::Empty),
            (format!("{ALICE}\nbob"), PskError::NoSeparator { line: 2 }),
            (
                ":00112233445566778899aabbccddeeff".into(),
                PskError::EmptyIdentity { line: 1 },
            ),
            ("a:0011223344556677889".into(), PskError::BadHex { line: 1 }),
            (
                "a:zz112233445566778899aabbccddeeff".into(),
                PskError::BadHex { line: 1 },
            ),
            ("a:".into(), PskError::BadHex { line: 1 }),
            ("a:0011".into(), PskError::KeyLength { line: 1, bytes: 2 }),
            (
                format!("a:{}", "00".repeat(65)),
                PskError::KeyLength { line: 1, bytes: 65 },
            ),
            (
                format!("{}:{}", "x".repeat(129), "00".repeat(16)),
                PskError::LongIdentity { line: 1 },
            ),
            (
                format!("{ALICE}\n{ALICE}"),
                PskError::Duplicate {
                    line: 2,
                    first: 1,
                    identity: "alice".into(),
                },
            ),
        ];
        for (file, want) in cases {
            assert_eq!(PskKeys::parse(file.as_bytes()), Err(want), "{file:?}");
        }
        assert_eq!(
            PskKeys::parse(b"a:\xff\xfe"),
            Err(PskError::NotText { line: 1 })
        );
        let big = vec![b'\n'; FILE_BYTES_MAX + 1];
        assert_eq!(
            PskKeys::parse(&big),
            Err(PskError::TooLarge(FILE_BYTES_MAX + 1))
        );
    }
}
