//! TLS for the daemons' ports (OpenSSL through `tokio-openssl`): a server side that accepts
//! either pre-shared keys (a keys file in psktool's format, [`cordillera_wire::psk`]) or X.509
//! certificates from a directory laid out as nbdkit and qemu lay it out, and a client side for
//! our own links and tests.
//!
//! Certificates directory (`--tls-certs DIR`), the names nbdkit's `--tls-certificates` and
//! qemu's `tls-creds-x509` use:
//!
//! - `ca-cert.pem`: the authority whose certificates are trusted (peers' and, for a client,
//!   the server's);
//! - `server-cert.pem`, `server-key.pem`: a server's certificate (chain) and key;
//! - `client-cert.pem`, `client-key.pem`: a client's, when the server verifies peers.
//!
//! Pre-shared keys run TLS 1.3 (or 1.2 with the PSK cipher suites, for older GnuTLS peers)
//! with no certificate: a client whose identity is not in the keys file, or whose key differs,
//! fails the handshake before it reads or sends a byte of the protocol inside.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use cordillera_wire::psk::{PskError, PskKeys};
use openssl::ssl::{
    Ssl, SslContext, SslContextBuilder, SslFiletype, SslMethod, SslVerifyMode, SslVersion,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_openssl::SslStream;

/// The TLS 1.2 cipher suites offered with pre-shared keys: ephemeral key exchange first
/// (forward secrecy), plain PSK last for peers without it; no unencrypted or weak ones.
const PSK_CIPHERS_TLS12: &str = "ECDHE-PSK:DHE-PSK:PSK:!eNULL:!aNULL:!3DES:!RC4:!MD5:!SHA1";

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Keys { path: PathBuf, source: PskError },
    #[error("{path}: holds no keys")]
    NoKeys { path: PathBuf },
    #[error("{what}: {source}")]
    Setup {
        what: String,
        source: openssl::error::ErrorStack,
    },
    #[error("TLS handshake failed: {0}")]
    Handshake(String),
}

fn setup(what: impl Into<String>) -> impl FnOnce(openssl::error::ErrorStack) -> TlsError {
    let what = what.into();
    move |source| TlsError::Setup { what, source }
}

/// Who the peer proved to be: its PSK identity, or its certificate's subject (common name)
/// when the server verifies certificates; `None` when it showed none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub identity: Option<String>,
}

/// Reads a keys file (psktool's format): every line checked, none skipped.
pub fn read_psk_file(path: &Path) -> Result<PskKeys, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })?;
    let keys = PskKeys::parse(&bytes).map_err(|source| TlsError::Keys {
        path: path.to_owned(),
        source,
    })?;
    if keys.is_empty() {
        return Err(TlsError::NoKeys {
            path: path.to_owned(),
        });
    }
    Ok(keys)
}

fn base(method: SslMethod) -> Result<SslContextBuilder, TlsError> {
    let mut b = SslContext::builder(method).map_err(setup("TLS context"))?;
    b.set_min_proto_version(Some(SslVersion::TLS1_2))
        .map_err(setup("TLS versions"))?;
    Ok(b)
}

fn file(dir: &Path, name: &str) -> Result<PathBuf, TlsError> {
    let path = dir.join(name);
    std::fs::metadata(&path).map_err(|source| TlsError::Read {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

fn load_pair(b: &mut SslContextBuilder, dir: &Path, side: &str) -> Result<(), TlsError> {
    let cert = file(dir, &format!("{side}-cert.pem"))?;
    let key = file(dir, &format!("{side}-key.pem"))?;
    b.set_certificate_chain_file(&cert)
        .map_err(setup(cert.display().to_string()))?;
    b.set_private_key_file(&key, SslFiletype::PEM)
        .map_err(setup(key.display().to_string()))?;
    b.check_private_key().map_err(setup(format!(
        "{} does not match {}",
        key.display(),
        cert.display()
    )))?;
    Ok(())
}

/// The accepting side of a port.
#[derive(Clone)]
pub struct TlsServer {
    context: SslContext,
    what: &'static str,
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what)
    }
}

impl TlsServer {
    /// A server that accepts the clients in `keys` (identity and key), and no one else.
    pub fn psk(keys: PskKeys) -> Result<TlsServer, TlsError> {
        let keys = Arc::new(keys);
        let mut b = base(SslMethod::tls_server())?;
        b.set_cipher_list(PSK_CIPHERS_TLS12)
            .map_err(setup("PSK cipher suites"))?;
        b.set_psk_server_callback(move |ssl, identity, out| {
            let Some((identity, key)) = identity.and_then(|id| Some((id, keys.get(id)?))) else {
                // Unknown identity: a zero-length key fails the handshake.
                return Ok(0);
            };
            if key.len() > out.len() {
                return Ok(0);
            }
            // OpenSSL does not keep a TLS 1.3 peer's PSK identity where
            // `SSL_get_psk_identity` finds it: kept with the session here.
            ssl.set_ex_data(psk_identity_index(), identity.to_vec());
            out[..key.len()].copy_from_slice(key);
            Ok(key.len())
        });
        Ok(TlsServer {
            context: b.build(),
            what: "pre-shared keys",
        })
    }

    /// A server with `server-cert.pem` and `server-key.pem` from `dir`; with `verify_peer`,
    /// clients must show a certificate signed by `ca-cert.pem`.
    pub fn certificates(dir: &Path, verify_peer: bool) -> Result<TlsServer, TlsError> {
        let mut b = base(SslMethod::tls_server())?;
        load_pair(&mut b, dir, "server")?;
        if verify_peer {
            let ca = file(dir, "ca-cert.pem")?;
            b.set_ca_file(&ca)
                .map_err(setup(ca.display().to_string()))?;
            b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
        }
        Ok(TlsServer {
            context: b.build(),
            what: "certificates",
        })
    }

    /// Runs the server side of the handshake over `stream`.
    pub async fn accept<S>(&self, stream: S) -> Result<(SslStream<S>, Peer), TlsError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let ssl = Ssl::new(&self.context).map_err(setup("TLS session"))?;
        let mut tls = SslStream::new(ssl, stream).map_err(setup("TLS stream"))?;
        Pin::new(&mut tls)
            .accept()
            .await
            .map_err(|e| TlsError::Handshake(e.to_string()))?;
        let peer = peer_of(tls.ssl());
        Ok((tls, peer))
    }
}

/// Where the server's PSK callback keeps the identity it accepted.
fn psk_identity_index() -> openssl::ex_data::Index<Ssl, Vec<u8>> {
    static INDEX: std::sync::OnceLock<openssl::ex_data::Index<Ssl, Vec<u8>>> =
        std::sync::OnceLock::new();
    *INDEX.get_or_init(|| Ssl::new_ex_index().expect("an OpenSSL ex_data index"))
}

fn peer_of(ssl: &openssl::ssl::SslRef) -> Peer {
    let accepted = ssl.ex_data(psk_identity_index()).map(Vec::as_slice);
    if let Some(id) = accepted.or_else(|| ssl.psk_identity()) {
        return Peer {
            identity: Some(String::from_utf8_lossy(id).into_owned()),
        };
    }
    let identity = ssl.peer_certificate().and_then(|cert| {
        cert.subject_name()
            .entries_by_nid(openssl::nid::Nid::COMMONNAME)
            .next()
            .and_then(|e| e.data().to_string().ok())
    });
    Peer { identity }
}

/// The connecting side: our own links and tests.
#[derive(Clone)]
pub struct TlsClient {
    context: SslContext,
    /// The name the server's certificate must carry (unused with keys).
    server_name: Option<String>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.server_name {
            Some(name) => write!(f, "certificates for {name}"),
            None => f.write_str("pre-shared key"),
        }
    }
}

impl TlsClient {
    /// A client that proves `identity` with `key`.
    pub fn psk(identity: &str, key: &[u8]) -> Result<TlsClient, TlsError> {
        let (identity, key) = (identity.as_bytes().to_vec(), key.to_vec());
        let mut b = base(SslMethod::tls_client())?;
        b.set_cipher_list(PSK_CIPHERS_TLS12)
            .map_err(setup("PSK cipher suites"))?;
        b.set_psk_client_callback(move |_ssl, _hint, id_out, key_out| {
            // The identity is written NUL-terminated.
            if identity.len() + 1 > id_out.len() || key.len() > key_out.len() {
                return Ok(0);
            }
            id_out[..identity.len()].copy_from_slice(&identity);
            id_out[identity.len()] = 0;
            key_out[..key.len()].copy_from_slice(&key);
            Ok(key.len())
        });
        Ok(TlsClient {
            context: b.build(),
            server_name: None,
        })
    }

    /// A client that trusts servers signed by `dir/ca-cert.pem` and named `server_name`, and
    /// shows `client-cert.pem` when the directory has one.
    pub fn certificates(dir: &Path, server_name: &str) -> Result<TlsClient, TlsError> {
        let mut b = base(SslMethod::tls_client())?;
        let ca = file(dir, "ca-cert.pem")?;
        b.set_ca_file(&ca)
            .map_err(setup(ca.display().to_string()))?;
        b.set_verify(SslVerifyMode::PEER);
        if dir.join("client-cert.pem").exists() {
            load_pair(&mut b, dir, "client")?;
        }
        Ok(TlsClient {
            context: b.build(),
            server_name: Some(server_name.to_owned()),
        })
    }

    /// Runs the client side of the handshake over `stream`.
    pub async fn connect<S>(&self, stream: S) -> Result<SslStream<S>, TlsError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut ssl = Ssl::new(&self.context).map_err(setup("TLS session"))?;
        if let Some(name) = &self.server_name {
            ssl.set_hostname(name).map_err(setup("server name"))?;
            ssl.param_mut()
                .set_host(name)
                .map_err(setup("server name check"))?;
        }
        let mut tls = SslStream::new(ssl, stream).map_err(setup("TLS stream"))?;
        Pin::new(&mut tls)
            .connect()
            .await
            .map_err(|e| TlsError::Handshake(e.to_string()))?;
        Ok(tls)
    }
}

/// An NBD port's TLS from the flags every daemon with one shares: `--tls`, `--tls-psk FILE`,
/// `--tls-certs DIR`, `--tls-verify-peer`. Keys files and certificates are read and checked
/// here, so a daemon with bad credentials does not start.
pub fn nbd_tls(
    policy: cordillera_wire::nbd::haggle::TlsPolicy,
    psk: Option<&Path>,
    certs: Option<&Path>,
    verify_peer: bool,
) -> Result<crate::nbd_server::NbdTls, String> {
    let server = match (psk, certs) {
        (Some(_), Some(_)) => return Err("give --tls-psk or --tls-certs, not both".into()),
        (Some(file), None) => Some(TlsServer::psk(
            read_psk_file(file).map_err(|e| e.to_string())?,
        )),
        (None, Some(dir)) => Some(TlsServer::certificates(dir, verify_peer)),
        (None, None) if verify_peer => return Err("--tls-verify-peer needs --tls-certs".into()),
        (None, None) => None,
    }
    .transpose()
    .map_err(|e| e.to_string())?;
    crate::nbd_server::NbdTls::new(policy, server)
}

/// The server side of our own daemons' links (`--cluster-key FILE`): every identity in the
/// keys file is accepted.
pub fn cluster_server(keys: &Path) -> Result<TlsServer, String> {
    TlsServer::psk(read_psk_file(keys).map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

/// The client side of our own daemons' links: proves `identity` (by default the keys file's
/// first) with its key from the file.
pub fn cluster_client(keys: &Path, identity: Option<&str>) -> Result<TlsClient, String> {
    let file = read_psk_file(keys).map_err(|e| e.to_string())?;
    let identity = match identity {
        Some(id) => id.to_owned(),
        None => file
            .identities()
            .next()
            .expect("a keys file read holds a key")
            .to_owned(),
    };
    let key = file
        .get(identity.as_bytes())
        .ok_or_else(|| format!("{}: no key for identity {identity:?}", keys.display()))?;
    TlsClient::psk(&identity, key).map_err(|e| e.to_string())
}

/// [`check_ports`] for a daemon of our own links: its protocol port (`listen`, named `port`)
/// beyond loopback only with the cluster key (`authenticated`), its read-only `--http`
/// figures (no token) only on loopback; `insecure` overrides both.
pub fn check_cluster_ports(
    port: &str,
    listen: Option<&str>,
    http: Option<&str>,
    authenticated: bool,
    insecure: bool,
) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    let resolve = |a: &str| -> Result<Vec<std::net::SocketAddr>, String> {
        Ok(a.to_socket_addrs()
            .map_err(|e| format!("{a}: {e}"))?
            .collect())
    };
    let mut ports = Vec::new();
    for addr in listen.map(resolve).transpose()?.unwrap_or_default() {
        ports.push((port, addr, authenticated, CLUSTER_CREDENTIALS));
    }
    for addr in http.map(resolve).transpose()?.unwrap_or_default() {
        ports.push(("--http", addr, false, "a loopback --http address"));
    }
    check_ports(&ports, insecure)
}

/// What protects our own daemons' links: a cluster key.
pub const CLUSTER_CREDENTIALS: &str = "--cluster-key FILE";

/// Whether a daemon may listen on `addr` for `port`: on loopback always; beyond it only when
/// the port keeps strangers out (`authenticated`), or when its operator says `--insecure`
/// (logged as a WARN). `how` names the flags that would protect the port.
pub fn check_exposure(
    port: &str,
    addr: std::net::SocketAddr,
    authenticated: bool,
    insecure: bool,
    how: &str,
) -> Result<(), String> {
    if addr.ip().is_loopback() || authenticated {
        return Ok(());
    }
    if insecure {
        tracing::warn!(%addr, port, "listening beyond loopback without credentials (--insecure): anyone who reaches this port can use it");
        return Ok(());
    }
    Err(format!(
        "refusing to listen on {addr} for {port} without credentials: anyone who can reach it could use it; give {how}, or --insecure to accept that"
    ))
}

/// What protects an NBD port: `--tls require` with keys or certificates.
pub const NBD_CREDENTIALS: &str = "--tls require with --tls-psk or --tls-certs";
/// What protects an HTTP endpoint: a control token.
pub const HTTP_CREDENTIALS: &str = "--control-token FILE";

/// [`check_exposure`] for each of a daemon's ports: (name, address, authenticated, how).
pub fn check_ports(
    ports: &[(&str, std::net::SocketAddr, bool, &str)],
    insecure: bool,
) -> Result<(), String> {
    for &(port, addr, authenticated, how) in ports {
        check_exposure(port, addr, authenticated, insecure, how)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_beyond_loopback_needs_credentials_or_insecure() {
        let local: std::net::SocketAddr = "127.0.0.1:10809".parse().unwrap();
        let any: std::net::SocketAddr = "0.0.0.0:10809".parse().unwrap();
        let v6: std::net::SocketAddr = "[::1]:10809".parse().unwrap();
        assert!(check_exposure("NBD", local, false, false, "--tls require").is_ok());
        assert!(check_exposure("NBD", v6, false, false, "--tls require").is_ok());
        let e = check_exposure("NBD", any, false, false, "--tls require").unwrap_err();
        assert!(
            e.contains("0.0.0.0:10809") && e.contains("--tls require"),
            "{e}"
        );
        assert!(check_exposure("NBD", any, true, false, "--tls require").is_ok());
        assert!(check_exposure("NBD", any, false, true, "--tls require").is_ok());
    }
}
