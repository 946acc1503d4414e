//! How a transaction's statements run, for the transactions whose SQL is shared between a
//! transaction of sqlx (either backend) and one run directly on SQLite's writing connection
//! (`direct`): ingest's. Owns only the running: parameters by number (`$N`, as everywhere in
//! the store) and reads of one packed text value (`packed`). Must not hold SQL of its own.

use rusqlite::types::{ToSqlOutput, ValueRef};
use sqlx::{Any, Row, Transaction};

/// A statement's parameter.
#[derive(Debug, Clone, Copy)]
pub(super) enum Arg<'a> {
    Text(&'a str),
    Int(i64),
    Real(f64),
    Null,
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(text: &'a str) -> Self {
        Arg::Text(text)
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(text: &'a String) -> Self {
        Arg::Text(text)
    }
}

impl From<i64> for Arg<'_> {
    fn from(n: i64) -> Self {
        Arg::Int(n)
    }
}

impl From<f64> for Arg<'_> {
    fn from(x: f64) -> Self {
        Arg::Real(x)
    }
}

impl<'a, T: Into<Arg<'a>>> From<Option<T>> for Arg<'a> {
    fn from(value: Option<T>) -> Self {
        value.map_or(Arg::Null, Into::into)
    }
}

/// What ingest's SQL runs on. Both kinds run the same text with the same parameters; the
/// futures of the direct kind are ready at once (it is called from a blocking thread).
#[allow(async_fn_in_trait)] // Used generically within the store only, never as `dyn`.
pub(super) trait Statements {
    /// Runs a statement and returns how many rows it changed.
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<u64>;

    /// Runs a query of one row of one text column (a `packed` read) and returns that text.
    async fn read_text(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<String>;

    /// Runs a statement returning rows of (text, text, integer, integer), the keys of the
    /// buckets an upsert wrote and a flag of each (`rollups`' `RETURNING`), and returns them.
    async fn read_keys(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<Vec<Key>>;

    /// Runs a statement returning rows of (text, integer), the ids and rowids an insert stored
    /// (ingest's `RETURNING` on SQLite), and returns them.
    async fn read_pairs(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> anyhow::Result<Vec<(String, i64)>>;
}

/// A row of `Statements::read_keys`.
pub(super) type Key = (String, String, i64, i64);

fn bound<'q>(
    mut query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
    args: &[Arg<'q>],
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
    for arg in args {
        query = match *arg {
            Arg::Text(text) => query.bind(text),
            Arg::Int(n) => query.bind(n),
            Arg::Real(x) => query.bind(x),
            Arg::Null => query.bind(None::<String>),
        };
    }
    query
}

impl Statements for Transaction<'_, Any> {
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<u64> {
        let done = bound(sqlx::query(sql), args).execute(&mut **self).await?;
        Ok(done.rows_affected())
    }

    async fn read_text(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<String> {
        let row = bound(sqlx::query(sql), args).fetch_one(&mut **self).await?;
        Ok(row.try_get(0)?)
    }

    async fn read_keys(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<Vec<Key>> {
        let rows = bound(sqlx::query(sql), args).fetch_all(&mut **self).await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get(0)?,
                    row.try_get(1)?,
                    row.try_get(2)?,
                    row.try_get(3)?,
                ))
            })
            .collect()
    }

    async fn read_pairs(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> anyhow::Result<Vec<(String, i64)>> {
        let rows = bound(sqlx::query(sql), args).fetch_all(&mut **self).await?;
        rows.iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect()
    }
}

impl rusqlite::ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Arg::Text(text) => ValueRef::Text(text.as_bytes()),
            Arg::Int(n) => ValueRef::Integer(n),
            Arg::Real(x) => ValueRef::Real(x),
            Arg::Null => ValueRef::Null,
        }))
    }
}

/// A transaction run directly on SQLite's writing connection (`direct`).
pub(super) struct Direct<'c, 't>(pub &'c rusqlite::Transaction<'t>);

impl Direct<'_, '_> {
    /// Prepares `sql` (cached for the transaction: a chunked statement runs again) and binds
    /// `$N` to `args[N - 1]`. SQLite numbers a `$N` parameter by where it first appears, not by
    /// `N`, so parameters are bound by name, as sqlx does.
    fn prepared(
        &self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> anyhow::Result<rusqlite::CachedStatement<'_>> {
        let mut statement = self.0.prepare_cached(sql)?;
        for index in 1..=statement.parameter_count() {
            let name = statement.parameter_name(index).unwrap_or_default();
            let arg = name
                .strip_prefix('$')
                .and_then(|n| n.parse::<usize>().ok())
                .and_then(|n| args.get(n.checked_sub(1)?))
                .ok_or_else(|| anyhow::anyhow!("parameter `{name}` has no argument"))?;
            statement.raw_bind_parameter(index, arg)?;
        }
        Ok(statement)
    }
}

impl Statements for Direct<'_, '_> {
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<u64> {
        Ok(self.prepared(sql, args)?.raw_execute()? as u64)
    }

    async fn read_text(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<String> {
        let mut statement = self.prepared(sql, args)?;
        let mut rows = statement.raw_query();
        let row = rows
            .next()?
            .ok_or_else(|| anyhow::anyhow!("a packed read returned no row"))?;
        Ok(row.get(0)?)
    }

    async fn read_keys(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<Vec<Key>> {
        let mut statement = self.prepared(sql, args)?;
        let mut rows = statement.raw_query();
        let mut keys = Vec::new();
        while let Some(row) = rows.next()? {
            keys.push((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?));
        }
        Ok(keys)
    }

    async fn read_pairs(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> anyhow::Result<Vec<(String, i64)>> {
        let mut statement = self.prepared(sql, args)?;
        let mut rows = statement.raw_query();
        let mut pairs = Vec::new();
        while let Some(row) = rows.next()? {
            pairs.push((row.get(0)?, row.get(1)?));
        }
        Ok(pairs)
    }
}
