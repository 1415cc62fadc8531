//! `pool serve`'s process: the NBD and HTTP listeners bound, both served on a runtime of two
//! threads until SIGINT or SIGTERM, then the pool stopped (its copier's batch finished).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::{serve_http, PoolExports, PoolServer};
use crate::http::ControlToken;
use crate::nbd_server::{serve_exports, ExportConfig};

/// Serves `server`'s volumes over NBD at `nbd` (each volume an export, `config` its TLS) and
/// its control plane at `http` (with `token`, as [`crate::http::admit`] says) until SIGINT or
/// SIGTERM; `ready` gets the addresses bound.
pub fn run(
    server: Arc<PoolServer>,
    nbd: SocketAddr,
    http: SocketAddr,
    config: ExportConfig,
    token: Option<ControlToken>,
    ready: impl FnOnce(SocketAddr, SocketAddr),
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let nbd = tokio::net::TcpListener::bind(nbd)
            .await
            .with_context(|| format!("listening on {nbd} for NBD"))?;
        let http = tokio::net::TcpListener::bind(http)
            .await
            .with_context(|| format!("listening on {http} for HTTP"))?;
        ready(nbd.local_addr()?, http.local_addr()?);
        let exports = Arc::new(PoolExports(server.clone()));
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("a SIGTERM handler")?;
        tokio::select! {
            r = serve_exports(nbd, exports, config) => r.map_err(anyhow::Error::from),
            _ = serve_http(server.clone(), http, token) => Ok(()),
            _ = tokio::signal::ctrl_c() => Ok(()),
            _ = term.recv() => Ok(()),
        }
    });
    server.stop();
    result
}
