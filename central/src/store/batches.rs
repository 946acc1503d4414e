//! How a batch (ids, or rows of an upload) travels to the database as one JSON array parameter,
//! and how statements read it on each backend: as a table (`id_source`, `json_rows`) or as the
//! keys a table is probed with (`listed`, `listed_ids`). Binding thousands of parameters one
//! by one costs more than the statement. Owns only these SQL fragments; must not hold a
//! statement of its own.
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

use super::Backend;

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
