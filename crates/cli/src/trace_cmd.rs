use clap::Args;
#[derive(Args)]
pub struct TraceArgs {}
pub fn run(_: TraceArgs) -> anyhow::Result<()> { Ok(()) }
