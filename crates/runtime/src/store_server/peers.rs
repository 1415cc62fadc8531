//! Who may use a store: its port beyond loopback only with a cluster key ([`check_exposure`]),
//! and client ids bound to authenticated peers (`store serve --cluster-key`): the first peer that
//! uses a client id owns it, recorded durably in the bindings file
//! ([`cordillera_wire::peers`]) before that request is served; any other peer's request for it
//! is answered `Denied` without reaching the store, so a forged id reads, writes and deletes
//! nothing. Connections without an authenticated peer (no TLS) are not bound.
//!
//! One id is nobody's: [`PROBE_CLIENT`], which every off-load client reads to learn whether a
//! store it counts as failed answers again. Any authenticated peer may read it (it holds
//! nothing); nobody may write, delete, recover or read-any it.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cordillera_vstore::store::Request;

/// The id off-load clients probe a store with (`cordillera_offload::client`'s, which never
/// owns data).
pub(super) const PROBE_CLIENT: u64 = u64::MAX;

/// The bindings of a store, and the authenticated peer of each open connection.
#[derive(Default)]
pub(super) struct Peers {
    bindings: Option<PeerBindings>,
    identities: HashMap<u64, String>,
}

/// What to do with a request.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Admit {
    Serve,
    Deny,
}

impl Peers {
    /// Peers whose client ids are bound in `path` (created when absent).
    pub(super) fn bound_in(path: &Path) -> Result<Peers> {
        Ok(Peers {
            bindings: Some(PeerBindings::open(path)?),
            identities: HashMap::new(),
        })
    }

    pub(super) fn connected(&mut self, connection: u64, identity: Option<String>) {
        if let Some(identity) = identity {
            self.identities.insert(connection, identity);
        }
    }

    pub(super) fn closed(&mut self, connection: u64) {
        self.identities.remove(&connection);
    }

    /// Whether `connection`'s request may go to the store.
    pub(super) fn admit(&mut self, connection: u64, request: &Request) -> Admit {
        let Some(bindings) = &mut self.bindings else {
            return Admit::Serve;
        };
        let Some(identity) = self.identities.get(&connection) else {
            // Bindings are kept only when every connection is authenticated.
            return Admit::Deny;
        };
        let client = client_of(request);
        if client == PROBE_CLIENT {
            return match request {
                Request::Read { .. } => Admit::Serve,
                _ => Admit::Deny,
            };
        }
        match bindings.admit(client, identity) {
            Ok(true) => Admit::Serve,
            Ok(false) => {
                tracing::warn!(
                    client,
                    peer = %identity,
                    owner = %bindings.by_client[&client],
                    "request for a client id bound to another peer denied"
                );
                Admit::Deny
            }
            Err(e) => {
                tracing::error!(client, peer = %identity, error = %e, "cannot record a client id's peer; request denied");
                Admit::Deny
            }
        }
    }
}

fn client_of(request: &Request) -> u64 {
    match request {
        Request::Write { client, .. }
        | Request::Read { client, .. }
        | Request::ReadAny { client }
        | Request::Delete { client, .. }
        | Request::Metadata { client, .. } => *client,
    }
}

/// The bindings file and what it holds.
struct PeerBindings {
    path: PathBuf,
    file: std::fs::File,
    by_client: BTreeMap<u64, String>,
}

impl PeerBindings {
    /// Reads the bindings file (refusing a damaged one), dropping a torn last line.
    fn open(path: &Path) -> Result<PeerBindings> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let parsed = cordillera_wire::peers::parse(&bytes)
            .with_context(|| format!("peer bindings file {}", path.display()))?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        if parsed.complete_bytes < bytes.len() {
            tracing::warn!(file = %path.display(), "a binding whose append did not complete is dropped");
            file.set_len(parsed.complete_bytes as u64)
                .with_context(|| format!("cannot truncate {}", path.display()))?;
            file.sync_data()
                .with_context(|| format!("cannot sync {}", path.display()))?;
        }
        tracing::info!(file = %path.display(), bound = parsed.by_client.len(), "peer bindings read");
        Ok(PeerBindings {
            path: path.to_owned(),
            file,
            by_client: parsed.by_client,
        })
    }

    /// True when `client` is `identity`'s (bound now if it was nobody's, durably).
    fn admit(&mut self, client: u64, identity: &str) -> std::io::Result<bool> {
        if let Some(owner) = self.by_client.get(&client) {
            return Ok(owner == identity);
        }
        if !cordillera_wire::peers::identity_ok(identity) {
            return Ok(false);
        }
        self.file
            .write_all(cordillera_wire::peers::line(client, identity).as_bytes())?;
        self.file.sync_data()?;
        tracing::info!(client, peer = %identity, file = %self.path.display(), "client id bound to its peer");
        self.by_client.insert(client, identity.to_owned());
        Ok(true)
    }
}

/// Where a store's peer bindings are kept: `explicit` (`--peers`), or beside a store file (a
/// block device's directory is no place for them).
pub fn peers_file(store: &Path, explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return Ok(p.to_owned());
    }
    use std::os::unix::fs::FileTypeExt;
    if std::fs::metadata(store).is_ok_and(|m| m.file_type().is_block_device()) {
        return Err(format!(
            "{} is a block device: give --peers FILE for the peer bindings",
            store.display()
        ));
    }
    let mut name = store.as_os_str().to_owned();
    name.push(".peers");
    Ok(PathBuf::from(name))
}

/// The store's port beyond loopback needs `--cluster-key` (`authenticated`); its read-only
/// `--http` figures stay on loopback (they have no token); `insecure` overrides both.
pub fn check_exposure(
    listen: std::net::SocketAddr,
    http: Option<&str>,
    authenticated: bool,
    insecure: bool,
) -> Result<(), String> {
    let listen = listen.to_string();
    let port = "the store protocol";
    crate::tls::check_cluster_ports(port, Some(&listen), http, authenticated, insecure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(client: u64) -> Request {
        Request::Read {
            client,
            offset_bytes: 0,
            length_bytes: 4096,
        }
    }

    #[test]
    fn a_client_id_belongs_to_its_first_peer_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.peers");
        let mut peers = Peers::bound_in(&path).unwrap();
        peers.connected(1, Some("alice".into()));
        peers.connected(2, Some("bob".into()));
        peers.connected(3, None);
        assert_eq!(peers.admit(1, &read(7)), Admit::Serve);
        assert_eq!(peers.admit(1, &read(7)), Admit::Serve);
        assert_eq!(peers.admit(2, &read(7)), Admit::Deny);
        assert_eq!(peers.admit(2, &read(8)), Admit::Serve);
        assert_eq!(peers.admit(3, &read(9)), Admit::Deny, "unauthenticated");
        // Every peer probes with the probe id, which nobody owns or writes.
        assert_eq!(peers.admit(1, &read(PROBE_CLIENT)), Admit::Serve);
        assert_eq!(peers.admit(2, &read(PROBE_CLIENT)), Admit::Serve);
        let probe_write = Request::Write {
            client: PROBE_CLIENT,
            volume: 1,
            offset_bytes: 0,
            version: 1,
            data: vec![1; 4096],
        };
        assert_eq!(peers.admit(1, &probe_write), Admit::Deny);
        // A torn append after the two bindings is dropped at the next start.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"9 mall")
            .unwrap();
        let mut peers = Peers::bound_in(&path).unwrap();
        peers.connected(1, Some("bob".into()));
        peers.connected(2, Some("mallory".into()));
        assert_eq!(peers.admit(1, &read(7)), Admit::Deny);
        assert_eq!(peers.admit(1, &read(8)), Admit::Serve);
        assert_eq!(peers.admit(2, &read(9)), Admit::Serve);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "7 alice\n8 bob\n9 mallory\n"
        );
        // Without bindings (no TLS) every request is served.
        let mut open = Peers::default();
        open.connected(1, None);
        assert_eq!(open.admit(1, &read(7)), Admit::Serve);
    }

    #[test]
    fn a_damaged_bindings_file_stops_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.peers");
        std::fs::write(&path, "7 alice\nseven bob\n").unwrap();
        let e = Peers::bound_in(&path).err().unwrap();
        assert!(format!("{e:#}").contains("line 2"), "{e:#}");
    }
}
