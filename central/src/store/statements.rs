//! How a transaction's statements run, for the transactions whose SQL is shared between a
//! transaction of sqlx (either backend) and one run directly on SQLite's writing connection
//! (`direct`): ingest's. Owns only the running: parameters by number (`$N`, as everywhere in
//! the store), reads of one packed text value (`packed`), and one statement run once per row
//! (`*_each`). Must not hold SQL of its own.
//!
//! Why per row: a batch's rows travel to PostgreSQL as one JSON parameter (one round trip),
//! but on SQLite's writing connection a statement is a function call, and binding a row's
//! values costs SQLite less than unpacking them from JSON (ingest's rollups' upsert at 20,000
//! monitors: 676 µs an upload from JSON, 387 µs a statement per row; docs/benchmarks.md).

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

impl Arg<'_> {
    /// The argument as a JSON value, for a row of a batch that travels as one JSON parameter.
    pub(super) fn to_json(self) -> serde_json::Value {
        match self {
            Arg::Text(text) => text.into(),
            Arg::Int(n) => n.into(),
            Arg::Real(x) => x.into(),
            Arg::Null => serde_json::Value::Null,
        }
    }
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

/// What ingest's SQL runs on. Both kinds run the same text with the same parameters (where a
/// statement's text or arguments differ by backend, its module chooses them); the futures of the direct kind are ready at once (it is called from a blocking thread).
#[allow(async_fn_in_trait)] // Used generically within the store only, never as `dyn`.
pub(super) trait Statements {
    /// Runs a statement and returns how many rows it changed.
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<u64>;

    /// Runs a query of one row of one text column (a `packed` read) and returns that text.
    async fn read_text(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<String>;

    /// Runs `sql` once per row of `rows`, in order, and returns how many rows each run changed.
    async fn execute_each(&mut self, sql: &str, rows: &[Vec<Arg<'_>>]) -> anyhow::Result<Vec<u64>>;

    /// Runs `sql` once per row of `rows`, in order, and returns every row all runs returned,
    /// each read by `read`.
    async fn read_each<T>(
        &mut self,
        sql: &str,
        rows: &[Vec<Arg<'_>>],
        read: fn(&dyn Columns) -> anyhow::Result<T>,
    ) -> anyhow::Result<Vec<T>>;
}

/// A returned row's columns by place (from 0), as `Statements::read_each` hands them to the
/// reader: a row of sqlx or one of SQLite's directly.
pub(super) trait Columns {
    fn text_or_null(&self, column: usize) -> anyhow::Result<Option<String>>;
    fn int_or_null(&self, column: usize) -> anyhow::Result<Option<i64>>;

    fn text(&self, column: usize) -> anyhow::Result<String> {
        self.text_or_null(column)?
            .ok_or_else(|| anyhow::anyhow!("column {column} is NULL"))
    }

    fn int(&self, column: usize) -> anyhow::Result<i64> {
        self.int_or_null(column)?
            .ok_or_else(|| anyhow::anyhow!("column {column} is NULL"))
    }
}

impl Columns for sqlx::any::AnyRow {
    fn text_or_null(&self, column: usize) -> anyhow::Result<Option<String>> {
        Ok(self.try_get(column)?)
    }

    fn int_or_null(&self, column: usize) -> anyhow::Result<Option<i64>> {
        Ok(self.try_get(column)?)
    }
}

impl Columns for rusqlite::Row<'_> {
    fn text_or_null(&self, column: usize) -> anyhow::Result<Option<String>> {
        Ok(self.get(column)?)
    }

    fn int_or_null(&self, column: usize) -> anyhow::Result<Option<i64>> {
        Ok(self.get(column)?)
    }
}

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

    async fn execute_each(&mut self, sql: &str, rows: &[Vec<Arg<'_>>]) -> anyhow::Result<Vec<u64>> {
        let mut changed = Vec::with_capacity(rows.len());
        for args in rows {
            changed.push(Statements::execute(self, sql, args).await?);
        }
        Ok(changed)
    }

    async fn read_each<T>(
        &mut self,
        sql: &str,
        rows: &[Vec<Arg<'_>>],
        read: fn(&dyn Columns) -> anyhow::Result<T>,
    ) -> anyhow::Result<Vec<T>> {
        let mut read_rows = Vec::new();
        for args in rows {
            for row in bound(sqlx::query(sql), args).fetch_all(&mut **self).await? {
                read_rows.push(read(&row)?);
            }
        }
        Ok(read_rows)
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
pub(super) struct Direct<'c>(pub &'c mut rusqlite::Connection);

impl Direct<'_> {
    /// Prepares `sql` (kept on the connection from one transaction to the next, `direct`) and binds
    /// `$N` to `args[N - 1]`.
    fn prepared(
        &self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> anyhow::Result<rusqlite::CachedStatement<'_>> {
        let mut statement = self.0.prepare_cached(sql)?;
        let numbers = numbers(&statement)?;
        bind(&mut statement, &numbers, args)?;
        Ok(statement)
    }
}

/// The `N` of each of a statement's parameters (`$N`), by SQLite's index. SQLite numbers a
/// `$N` parameter by where it first appears, not by `N`, so parameters are bound by name, as
/// sqlx does.
fn numbers(statement: &rusqlite::Statement<'_>) -> anyhow::Result<Vec<usize>> {
    (1..=statement.parameter_count())
        .map(|index| {
            let name = statement.parameter_name(index).unwrap_or_default();
            name.strip_prefix('$')
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| anyhow::anyhow!("parameter `{name}` is not `$N`"))
        })
        .collect()
}

/// Binds each parameter (`numbers`) to its argument.
fn bind(
    statement: &mut rusqlite::Statement<'_>,
    numbers: &[usize],
    args: &[Arg<'_>],
) -> anyhow::Result<()> {
    for (index, &n) in numbers.iter().enumerate() {
        let arg = args
            .get(n - 1)
            .ok_or_else(|| anyhow::anyhow!("parameter `${n}` has no argument"))?;
        statement.raw_bind_parameter(index + 1, arg)?;
    }
    Ok(())
}

impl Statements for Direct<'_> {
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<u64> {
        Ok(self.prepared(sql, args)?.raw_execute()? as u64)
    }

    async fn execute_each(&mut self, sql: &str, rows: &[Vec<Arg<'_>>]) -> anyhow::Result<Vec<u64>> {
        let mut statement = self.0.prepare_cached(sql)?;
        let numbers = numbers(&statement)?;
        let mut changed = Vec::with_capacity(rows.len());
        for args in rows {
            bind(&mut statement, &numbers, args)?;
            changed.push(statement.raw_execute()? as u64);
        }
        Ok(changed)
    }

    async fn read_each<T>(
        &mut self,
        sql: &str,
        rows: &[Vec<Arg<'_>>],
        read: fn(&dyn Columns) -> anyhow::Result<T>,
    ) -> anyhow::Result<Vec<T>> {
        let mut statement = self.0.prepare_cached(sql)?;
        let numbers = numbers(&statement)?;
        let mut read_rows = Vec::new();
        for args in rows {
            bind(&mut statement, &numbers, args)?;
            let mut returned = statement.raw_query();
            while let Some(row) = returned.next()? {
                read_rows.push(read(row)?);
            }
        }
        Ok(read_rows)
    }

    async fn read_text(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<String> {
        let mut statement = self.prepared(sql, args)?;
        let mut rows = statement.raw_query();
        let row = rows
            .next()?
            .ok_or_else(|| anyhow::anyhow!("a packed read returned no row"))?;
        Ok(row.get(0)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_and_number(row: &dyn Columns) -> anyhow::Result<(String, i64)> {
        Ok((row.text(0)?, row.int(1)?))
    }

    /// Each row's arguments are bound by the `N` of `$N`, whatever the order the parameters
    /// appear in (SQLite numbers them by appearance), and a statement runs once per row.
    #[tokio::test]
    async fn each_row_binds_its_arguments_by_number() {
        let mut db = rusqlite::Connection::open_in_memory().unwrap();
        db.execute_batch("CREATE TABLE t (a TEXT, b BIGINT)")
            .unwrap();
        let mut direct = Direct(&mut db);
        let rows = vec![
            vec![Arg::Int(1), Arg::Text("x")],
            vec![Arg::Int(2), Arg::Text("y")],
        ];
        let changed = direct
            .execute_each("INSERT INTO t (a, b) VALUES ($2, $1)", &rows)
            .await
            .unwrap();
        assert_eq!(changed, [1, 1]);
        let read = direct
            .read_each(
                "SELECT a, b FROM t WHERE b >= $1 ORDER BY b",
                &[vec![Arg::Int(2)], vec![Arg::Int(1)]],
                text_and_number,
            )
            .await
            .unwrap();
        let expected = [("y", 2), ("x", 1), ("y", 2)].map(|(a, b)| (a.to_string(), b));
        assert_eq!(read, expected);
        // Each run's count of changed rows, in order.
        let changed = direct
            .execute_each(
                "UPDATE t SET b = b + 10 WHERE a = $1",
                &[vec![Arg::Text("z")], vec![Arg::Text("x")]],
            )
            .await
            .unwrap();
        assert_eq!(changed, [0, 1]);
    }

    /// A row with too few arguments is refused, not run with a NULL in their place.
    #[tokio::test]
    async fn a_missing_argument_is_an_error() {
        let mut db = rusqlite::Connection::open_in_memory().unwrap();
        db.execute_batch("CREATE TABLE t (a TEXT, b BIGINT)")
            .unwrap();
        let mut direct = Direct(&mut db);
        let error = direct
            .execute_each(
                "INSERT INTO t (a, b) VALUES ($1, $2)",
                &[vec![Arg::Text("x")]],
            )
            .await
            .unwrap_err();
        assert!(error.to_string().contains("`$2`"), "{error}");
        let count: i64 = db
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 0);
    }
}
