//! `central demo`: central, an embedded agent and sample monitors, with no setup.
use crate::config::DemoArgs;
pub async fn run(_args: DemoArgs) -> anyhow::Result<()> {
    anyhow::bail!("demo is being written")
}
