//! TLS flags shared by every daemon with an NBD port (`volume serve`, `pool serve`), named as
//! nbdkit names them.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use cordillera_runtime::nbd_server::NbdTls;
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
