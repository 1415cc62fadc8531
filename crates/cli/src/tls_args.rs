//! TLS flags shared by every daemon with an NBD port (`volume serve`, `pool serve`), named as
//! nbdkit names them; and the cluster key of our own daemons' links (stores and their
//! clients).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use cordillera_runtime::nbd_server::NbdTls;
use cordillera_runtime::tls::{TlsClient, TlsServer};
use cordillera_wire::nbd::haggle::TlsPolicy;

#[derive(Args, Clone, Debug, Default)]
pub struct TlsArgs {
    /// `off`: STARTTLS is refused; `allow`: clients may start TLS; `require`: they must, and
    /// learn nothing (not even export names) before it.
    #[arg(long, default_value = "off", value_name = "off|allow|require")]
    pub tls: TlsPolicy,
    /// Pre-shared keys, one `identity:hexkey` per line (psktool's format, as nbdkit's
    /// `--tls-psk` and libnbd's `tls-psk-file`).
    #[arg(long, value_name = "FILE")]
    pub tls_psk: Option<PathBuf>,
    /// X.509 credentials: `server-cert.pem`, `server-key.pem` and, with `--tls-verify-peer`,
    /// `ca-cert.pem` (nbdkit's `--tls-certificates` layout).
    #[arg(long, value_name = "DIR")]
    pub tls_certs: Option<PathBuf>,
    /// With `--tls-certs`: clients must show a certificate signed by `ca-cert.pem`.
    #[arg(long)]
    pub tls_verify_peer: bool,
    /// Listen beyond loopback without credentials (logged as a warning); refused otherwise.
    #[arg(long)]
    pub insecure: bool,
}

impl TlsArgs {
    pub fn nbd(&self) -> Result<NbdTls> {
        let (psk, certs) = (self.tls_psk.as_deref(), self.tls_certs.as_deref());
        cordillera_runtime::tls::nbd_tls(self.tls, psk, certs, self.tls_verify_peer)
            .map_err(anyhow::Error::msg)
    }
}

/// The environment variable `--cluster-key` falls back to.
pub const CLUSTER_KEY_ENV: &str = "CORDILLERA_CLUSTER_KEY";

/// Our own daemons' links over TLS with pre-shared keys: a store serving with `--cluster-key`
/// accepts only the identities in its keys file and binds each client id to the first
/// identity that uses it; a client (`volume serve`) proves `--cluster-identity` with its key.
#[derive(Args, Clone, Debug, Default)]
pub struct ClusterKeyArgs {
    /// A keys file (psktool's format, `identity:hexkey` lines) for the links between our
    /// daemons: a server accepts every identity in it, a client proves one (`cluster up
    /// --cluster-key` gives it to the daemons it starts through the environment).
    #[arg(long, value_name = "FILE", env = CLUSTER_KEY_ENV)]
    pub cluster_key: Option<PathBuf>,
    /// The identity a client proves [default: the keys file's first].
    #[arg(long, value_name = "NAME", requires = "cluster_key")]
    pub cluster_identity: Option<String>,
}

impl ClusterKeyArgs {
    pub fn server(&self) -> Result<Option<TlsServer>> {
        self.cluster_key
            .as_deref()
            .map(cordillera_runtime::tls::cluster_server)
            .transpose()
            .map_err(anyhow::Error::msg)
    }

    /// A Sierra daemon's links (both sides).
    pub fn sierra(&self) -> Result<Option<cordillera_runtime::sierra::net::ClusterTls>> {
        let identity = self.cluster_identity.as_deref();
        let tls = |keys| cordillera_runtime::sierra::net::ClusterTls::from_keys(keys, identity);
        let keys = self.cluster_key.as_deref();
        keys.map(tls).transpose().map_err(anyhow::Error::msg)
    }

    pub fn client(&self) -> Result<Option<TlsClient>> {
        let identity = self.cluster_identity.as_deref();
        self.cluster_key
            .as_deref()
            .map(|keys| cordillera_runtime::tls::cluster_client(keys, identity))
            .transpose()
            .map_err(anyhow::Error::msg)
    }
}
