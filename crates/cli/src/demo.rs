use clap::Args;
#[derive(Args)]
pub struct DemoArgs {}
pub fn run(_: DemoArgs) -> anyhow::Result<()> { Ok(()) }
