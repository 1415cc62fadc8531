//! Flags bounding what clients can take from a daemon (`store serve`, `volume serve`).

use anyhow::Result;
use clap::Args;
use cordillera_models::presets::parse_size;
use cordillera_runtime::limits::Limits;

#[derive(Args, Clone, Debug)]
pub struct LimitArgs {
    /// Memory one connection may hold in requests in flight and replies not yet written
    /// (e.g. `64m`); a client that does not read its replies is no longer read from beyond it.
    #[arg(long, default_value = "64m")]
    pub connection_memory: String,
    /// Memory all connections together may hold that way.
    #[arg(long, default_value = "1g")]
    pub total_memory: String,
    /// Requests one connection may have in flight or awaiting the write of their replies.
    #[arg(long, default_value_t = 1024)]
    pub connection_requests: usize,
    /// Connections open at once; more are closed as soon as they are accepted.
    #[arg(long, default_value_t = 512)]
    pub max_connections: usize,
}

impl LimitArgs {
    pub fn limits(&self) -> Result<Limits> {
        let connection_bytes = parse_size(&self.connection_memory).map_err(anyhow::Error::msg)?;
        let total_bytes = parse_size(&self.total_memory).map_err(anyhow::Error::msg)?;
        anyhow::ensure!(
            connection_bytes >= 1 << 20,
            "--connection-memory must be at least 1 MiB"
        );
        anyhow::ensure!(
            total_bytes >= connection_bytes,
            "--total-memory must be at least --connection-memory"
        );
        anyhow::ensure!(
            self.connection_requests >= 1 && self.max_connections >= 1,
            "--connection-requests and --max-connections must be at least 1"
        );
        Ok(Limits {
            connection_bytes,
            connection_requests: self.connection_requests,
            total_bytes,
            connections: self.max_connections,
        })
    }
}

impl Default for LimitArgs {
    /// The same as the flags' defaults.
    fn default() -> LimitArgs {
        LimitArgs {
            connection_memory: "64m".into(),
            total_memory: "1g".into(),
            connection_requests: 1024,
            max_connections: 512,
        }
    }
}
