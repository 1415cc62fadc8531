use clap::Args;
#[derive(Args)]
pub struct BenchArgs {}
pub fn run(_: BenchArgs) -> anyhow::Result<()> { Ok(()) }
