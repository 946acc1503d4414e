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
    let packed = super::dialect::packed_rows(backend, &pairs.join(", "), order);
    format!(
        "SELECT {packed} FROM (SELECT {} {rest}) AS packed",
        inner.join(", ")
    )
}

/// A column list as the store writes it (`"a, b, CASE … END AS c"`), as `(name, expression)`
/// pairs for `packed`. Expressions hold no commas.
pub(super) fn columns_of(list: &str) -> Vec<(&str, &str)> {
    list.split(',')
        .map(str::trim)
        .map(|column| match column.rsplit_once(" AS ") {
            Some((expression, name)) => (name.trim(), expression.trim()),
            None => (column, column),
        })
        .collect()
}

/// A 0/1 flag column as a `bool` (flags are `BIGINT` in both dialects).
pub(super) fn flag<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(<i64 as serde::Deserialize>::deserialize(d)? != 0)
}

/// A nullable 0/1 flag column as an `Option<bool>`.
pub(super) fn optional_flag<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<bool>, D::Error> {
    Ok(<Option<i64> as serde::Deserialize>::deserialize(d)?.map(|f| f != 0))
}

/// The rows of a `packed` query's value.
pub(super) fn unpack<T: DeserializeOwned>(text: &str) -> anyhow::Result<Vec<T>> {
    serde_json::from_str(text).context("the database packed rows this build cannot read")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_list_names_each_column_and_keeps_expressions() {
        assert_eq!(
            columns_of("a, b,\n  CASE WHEN x = y THEN s ELSE 'r' END AS c"),
            [
                ("a", "a"),
                ("b", "b"),
                ("c", "CASE WHEN x = y THEN s ELSE 'r' END")
            ]
        );
    }
}
