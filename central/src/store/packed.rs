//! Many rows read as one: a query's rows packed by the database into one JSON array of
//! objects and read back as one value. On SQLite each row crosses from the driver's worker
//! thread to the task that reads it, and a crossing can wake a sleeping thread on either side
//! (kernel time, several microseconds each on a small virtual machine: at 100,000 monitors
//! the reads behind each result cost more in wake-ups than in SQL); a packed read is one
//! crossing however many rows it holds. On PostgreSQL rows arrive on one socket either way;
//! the same SQL serves both. Owns only the shape of such queries, not what they read.

use anyhow::Context;
use serde::de::DeserializeOwned;

use super::Backend;

/// `SELECT <columns> <rest>`, its rows packed into one row of one text column: a JSON array
/// of objects keyed by each column's name (`(name, expression)`), in the order of `order`
/// (names of those columns). `rest` may end in a row lock (`FOR UPDATE`).
pub(super) fn packed(
    backend: Backend,
    columns: &[(&str, &str)],
    rest: &str,
    order: &str,
) -> String {
    let inner: Vec<String> = columns
        .iter()
        .map(|(name, expression)| format!("{expression} AS {name}"))
        .collect();
    let pairs: Vec<String> = columns
        .iter()
        .map(|(name, _)| format!("'{name}', {name}"))
        .collect();
    let pairs = pairs.join(", ");
    let packed = match backend {
        Backend::Sqlite => format!("json_group_array(json_object({pairs}) ORDER BY {order})"),
        Backend::Postgres => format!(
            "CAST(COALESCE(json_agg(json_build_object({pairs}) ORDER BY {order}), '[]') AS TEXT)"
        ),
    };
    format!(
        "SELECT {packed} FROM (SELECT {} {rest}) AS packed",
        inner.join(", ")
    )
}

/// The rows of a `packed` query's value.
pub(super) fn unpack<T: DeserializeOwned>(text: &str) -> anyhow::Result<Vec<T>> {
    serde_json::from_str(text).context("the database packed rows this build cannot read")
}
