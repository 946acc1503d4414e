//! PostgreSQL's connections: one pool of 16 that reads and writes (the server orders writers
//! itself), each connection pinged before use so that one the network dropped is replaced.
//! Opens; never reads or writes a table.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};

use super::{redacted, Backend, Opened};

/// Opens the pool on a PostgreSQL URL; writes go through the same pool.
pub(super) async fn open(url: &str) -> anyhow::Result<Opened> {
    let options = AnyConnectOptions::from_str(url)
        .with_context(|| format!("invalid CENTRAL_DATABASE_URL `{}`", redacted(url)))?;
    let pool = AnyPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        .test_before_acquire(true)
        .connect_with(options)
        .await
        .with_context(|| format!("cannot open the database at `{}`", redacted(url)))?;
    Ok(Opened {
        backend: Backend::Postgres,
        url: url.to_string(),
        writer: pool.clone(),
        pool,
        sqlite_file: None,
    })
}
