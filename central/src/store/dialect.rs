//! What SQL differs between SQLite and PostgreSQL, named by why it differs. Every other store
//! module asks here instead of matching on `Backend`, so a reader sees the reason for a
//! difference where it is used (`backend.keeps_results_head()`), not only that there is one.
//! Owns SQL fragments and these answers; must not hold a statement of its own beyond `notify`.
//!
//! The differences, by kind:
//! - **Batches** travel as one JSON array parameter, read as a table (`id_source`,
//!   `json_rows`) or as the keys a table is probed with (`listed`, `listed_ids`): binding
//!   thousands of parameters one by one costs more than the statement.
//! - **Row by row or all at once** (`binds_each_row`): on SQLite a hot statement runs once per
//!   row, prepared once on the writing connection (`statements` says why); on PostgreSQL once
//!   per batch, over its JSON rows, since each statement is a round trip.
//! - **Writers side by side** (`writes_concurrently`): SQLite has one writing connection in
//!   one process (`sqlite::WriteLocks`), so nothing is locked and nobody else needs telling;
//!   on PostgreSQL transactions of this replica's pool and of other replicas write at once, so
//!   writers lock what they read to change (`for_update`, in key order so two never wait for
//!   each other) and tell the others of a commit (`notify`).
//! - **The results head** (`keeps_results_head`): on SQLite the newest results are found by
//!   rowid in memory (`head`) and older ones through `result_index`; PostgreSQL indexes
//!   `results` itself.
//! - **JSON, packing and planner hints** (`json_text`, `packed_rows`, `without_index`,
//!   `indexed_by`).
//!
//! Why probes are spelled out on PostgreSQL (`= ANY(ARRAY(…))`, not `IN (SELECT … FROM
//! jsonb_array_elements…)`): the planner cannot see into a JSON parameter and guesses 100
//! rows for a set-returning function. Against a table of up to some tens of thousands of
//! narrow rows (`alert_due` at 20,000 monitors: 306 pages), 100 index probes cost more in
//! its model than reading the whole table, so it read the whole table: a seq scan or a walk
//! of the `due_at` index, then a hash join, once per statement, three times per upload. That
//! was 118 of PostgreSQL's 145 s of statement time in 100 s of the scale benchmark at 20,000
//! monitors (docs/benchmarks.md). An array built from the parameter is one value whose length
//! the planner assumes small (10): the key's index is probed for each id, whatever the
//! table's size, and whether the plan is generic or made with the values.

use super::statements::Statements;
use super::Backend;

impl Backend {
    /// Both, in the order of their discriminants: a statement's texts built once per backend
    /// are kept as `[_; 2]` and indexed by `backend as usize`.
    pub const BOTH: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];

    /// Whether hot statements run once per row (SQLite) rather than once per batch over its
    /// JSON rows (PostgreSQL); the module's note says why.
    pub fn binds_each_row(self) -> bool {
        self == Backend::Sqlite
    }

    /// Whether other transactions write at the same time (PostgreSQL: this replica's pool and
    /// other replicas), so that writers lock rows and tell other replicas of commits; SQLite
    /// has one writing connection in one process.
    pub fn writes_concurrently(self) -> bool {
        self == Backend::Postgres
    }

    /// Whether a table's rows lie in the order they were inserted (SQLite: by rowid), so that a
    /// row stored anew lies beside the others stored with it (`due`'s "where the rows lie");
    /// PostgreSQL's heap puts a row wherever there is room.
    pub fn stores_rows_in_rowid_order(self) -> bool {
        self == Backend::Sqlite
    }

    /// Whether the newest results are kept in memory by rowid (`head`) and older ones found
    /// through `result_index` (SQLite), rather than through an index on `results` itself.
    pub fn keeps_results_head(self) -> bool {
        self == Backend::Sqlite
    }
}

/// Locks the rows a read selects, in `order` (a column list) so that two writers take them in
/// the same order and never wait for each other: ` ORDER BY {order} FOR UPDATE` where writers
/// run side by side (`writes_concurrently`), nothing on SQLite.
pub(super) fn for_update(backend: Backend, order: &str) -> String {
    if backend.writes_concurrently() {
        format!(" ORDER BY {order}{}", row_lock(backend))
    } else {
        String::new()
    }
}

/// ` FOR UPDATE` where writers run side by side (`writes_concurrently`), for a read that
/// orders its rows itself (before a `LIMIT`); nothing on SQLite.
pub(super) fn row_lock(backend: Backend) -> &'static str {
    if backend.writes_concurrently() {
        " FOR UPDATE"
    } else {
        ""
    }
}

/// Tells the other replicas, when the transaction commits, on `channel` with `payload`
/// (PostgreSQL's `NOTIFY`: sent once per transaction and payload, heard only after commit).
/// Nothing on SQLite: one process, whose waiters are woken in memory.
pub(super) async fn notify(
    backend: Backend,
    tx: &mut impl Statements,
    channel: &str,
    payload: &str,
) -> anyhow::Result<()> {
    if backend.writes_concurrently() {
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[channel.into(), payload.into()],
        )
        .await?;
    }
    Ok(())
}

/// The text at `field` of the JSON text column `column` (PostgreSQL keeps JSON as text here
/// and must parse it; SQLite's `->>` reads text directly).
pub(super) fn json_text(backend: Backend, column: &str, field: &str) -> String {
    match backend {
        Backend::Sqlite => format!("{column} ->> '{field}'"),
        Backend::Postgres => format!("CAST({column} AS jsonb) ->> '{field}'"),
    }
}

/// `column` as a term the planner does not choose an index for: SQLite's unary `+` (its
/// documented way); PostgreSQL plans by statistics and has no unary `+` for text.
pub(super) fn without_index(backend: Backend, column: &str) -> String {
    match backend {
        Backend::Sqlite => format!("+{column}"),
        Backend::Postgres => column.to_string(),
    }
}

/// On SQLite the hint that a read takes `index` (` INDEXED BY …`); nothing on PostgreSQL,
/// which has no hints.
pub(super) fn indexed_by(backend: Backend, index: &str) -> String {
    match backend {
        Backend::Sqlite => format!(" INDEXED BY {index}"),
        Backend::Postgres => String::new(),
    }
}

/// An aggregate of the rows `pairs` (`'name', name, …`) as one JSON array of objects in text,
/// in `order`; `[]` for no rows on both (`packed`).
pub(super) fn packed_rows(backend: Backend, pairs: &str, order: &str) -> String {
    match backend {
        // Text all the way: built as JSONB instead (`json(jsonb_group_array(jsonb_object(…)))`)
        // a scrape of 100,000 monitors took a fifth longer, since `jsonb_object` writes its
        // object as text and parses that into JSONB, and `json` writes it all as text again.
        Backend::Sqlite => format!("json_group_array(json_object({pairs}) ORDER BY {order})"),
        Backend::Postgres => format!(
            "CAST(COALESCE(json_agg(json_build_object({pairs}) ORDER BY {order}), '[]') AS TEXT)"
        ),
    }
}

/// The ids of the JSON array `parameter` as a one-column subquery.
pub(super) fn id_list(backend: Backend, parameter: &str) -> String {
    match backend {
        Backend::Sqlite => format!("SELECT value FROM json_each({parameter})"),
        Backend::Postgres => {
            format!("SELECT jsonb_array_elements_text(CAST({parameter} AS jsonb))")
        }
    }
}

/// The ids in a JSON array parameter (`$1`) as a column `value`.
pub(super) fn id_source(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "json_each($1)",
        Backend::Postgres => "jsonb_array_elements_text(CAST($1 AS jsonb)) AS ids(value)",
    }
}

/// The rows of a JSON array parameter, as `r.value`. On SQLite each row is made JSONB once
/// (a materialised table): `json_each` hands each object over as text, which every `->>` on
/// it turned back into JSONB (about a fifth of central's CPU at 100,000 monitors).
pub(super) fn json_rows(backend: Backend, parameter: &str) -> String {
    match backend {
        Backend::Sqlite => format!(
            "(WITH rows(value) AS MATERIALIZED (SELECT jsonb(value) FROM json_each({parameter})) \
             SELECT value FROM rows) AS r"
        ),
        Backend::Postgres => {
            format!("jsonb_array_elements(CAST({parameter} AS jsonb)) AS r(value)")
        }
    }
}

/// A condition: `column` is one of the ids of the JSON array `parameter`; a probe of
/// `column`'s index per id on both backends (see the module's note for PostgreSQL).
pub(super) fn listed(backend: Backend, column: &str, parameter: &str) -> String {
    match backend {
        Backend::Sqlite => format!("{column} IN (SELECT value FROM json_each({parameter}))"),
        Backend::Postgres => format!(
            "{column} = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST({parameter} AS jsonb))))"
        ),
    }
}

/// A condition for a PostgreSQL statement that joins a table to the rows of the JSON array
/// `parameter` (`json_rows`): the table's `column` is one of the rows' `field`s, so that the
/// table is read by probing its key, not joined whole (see the module's note). SQLite has no
/// such statement: its planner drives such a join from the batch's rows, and ingest's
/// statements there run once per row anyway (`statements`).
pub(super) fn listed_ids(column: &str, parameter: &str, field: &str) -> String {
    format!(
        "{column} = ANY(ARRAY(SELECT k.value ->> '{field}' \
         FROM jsonb_array_elements(CAST({parameter} AS jsonb)) AS k(value)))"
    )
}
