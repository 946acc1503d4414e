//! `alert_due`: when alerting must look at each monitor next. Writers of what a status depends
//! on mark the monitors they touch due now, in their own transaction (`mark_due`); alerting
//! reads the rows due by now through the `due_at` index (`due_looks`) and, after its look,
//! sets each one's next instant or removes it (`finish_looks`, inside `record_alerts`).
//!
//! A mark always bumps `marks`; a look's result is written only if `marks` is what the look
//! read, so a mark that comes in while a look is under way is never overwritten: the row stays
//! due and is looked at again.
//!
//! A look that finds a monitor steady (`Look::steady`) lets the results that only confirm its
//! verdict move the row's instant themselves (`confirm_due`), without a look: at a steady
//! state, looks follow news and the instants time brings, not the results that arrive. Any
//! mark clears `steady`.
//!
//! Cost: a mark or a confirmation is one write per monitor touched; a look reads only the rows
//! due. Must not: decide anything about statuses (that is `service::alerts`).
//!
//! Where the rows lie (SQLite): a mark stores its rows anew at the table's end, together
//! (`marked_anew`), instead of updating each where it was first made. A monitor's last mark
//! before it settles is the news of a result, so the rows of the monitors an agent uploads
//! together lie together, as their status rows do (made by their first results), and each
//! upload's confirmations then update a few pages instead of a page per monitor: at 100,000
//! monitors the rows lay where the monitors' creation put them, and this table took a fifth
//! of the pages ingest wrote (docs/benchmarks.md).

use sqlx::{Any, Transaction};

use super::dialect::{id_source, listed, listed_ids};
use super::statements::{Arg, Statements};
use shared_proto::settings_api::{LocationStatus, MonitorStatus};

use super::{Backend, Store};

/// One monitor's look as alerting finished it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    pub monitor_id: String,
    /// `marks` as the look read it.
    pub marks: i64,
    /// When to look again; `None`: only when something marks it.
    pub next_at: Option<i64>,
    /// The status the monitor shows now, when it differs from its `shown_status`.
    pub shown: Option<MonitorStatus>,
    /// The locations (region, status) whose status now differs from their `shown_status`.
    pub shown_locations: Vec<(String, LocationStatus)>,
    /// The monitor shows its confirmed verdict from one place with nothing held: a result
    /// that only confirms the verdict changes nothing but when time alone could change it
    /// (`confirm_due`). Holds the interval (ms) the look saw: a confirmation worked out with
    /// another one (read before an edit) is marked instead.
    pub steady: Option<i64>,
    /// When the alert rules alone could tell something (a reminder, a held notice let go).
    pub rule_at: Option<i64>,
}

impl Look {
    /// A look after which only a new mark makes the monitor due again, and that shows nothing
    /// new (a monitor deleted since it was marked).
    pub fn settled(monitor_id: &str, marks: i64) -> Look {
        Look {
            monitor_id: monitor_id.to_string(),
            marks,
            next_at: None,
            shown: None,
            shown_locations: Vec::new(),
            steady: None,
            rule_at: None,
        }
    }
}

/// How far before its arrival a result that changes a monitor's verdict is marked due: looks
/// take the most overdue first, so such news is looked at before a backlog of results that
/// only confirm what was known (agents that upload together, a fleet coming back after an
/// outage), whose monitors are marked due when they arrive. Only the order among rows already
/// due changes: nothing is looked at earlier than it would be anyway.
pub(super) const NEWS_AHEAD_MS: i64 = 3_600_000;

/// Marks the monitors in `ids` (a JSON array of ids) due at `at`, or earlier if they already
/// were; in the caller's transaction, so a change and its mark are stored together. In id
/// order, so two transactions marking overlapping sets on PostgreSQL cannot deadlock. Clears
/// `steady`: the next look decides afresh.
pub(super) async fn mark_due(
    tx: &mut impl Statements,
    backend: Backend,
    ids: &str,
    at: i64,
) -> anyhow::Result<()> {
    let sql = if backend.stores_rows_in_rowid_order() {
        marked_anew("SELECT DISTINCT value AS id FROM json_each($1)", "true")
    } else {
        format!(
            "INSERT INTO alert_due (monitor_id, due_at, marks) \
             SELECT DISTINCT value, CAST($2 AS BIGINT), 1 FROM {} WHERE true ORDER BY 1 \
             ON CONFLICT (monitor_id) DO UPDATE SET \
             due_at = CASE WHEN excluded.due_at < alert_due.due_at THEN excluded.due_at \
                      ELSE alert_due.due_at END, \
             marks = alert_due.marks + 1, steady = 0",
            id_source(backend)
        )
    };
    tx.execute(&sql, &[ids.into(), at.into()]).await?;
    // Heard by the lease holder when this commits, whichever replica wrote it; PostgreSQL
    // sends one per transaction however many marks it holds.
    notify_due(tx, backend).await
}

/// SQLite's mark (see "Where the rows lie" above): the rows of the candidates (`c`, a query
/// with an `id` column) that pass `filter` (over `c` and `a`, the monitor's row as it is, if
/// any) made due at `$2` or earlier if they already were, `marks` bumped, `steady` cleared,
/// `rule_at` kept, and stored anew: `REPLACE` deletes the row it finds and inserts the new one
/// with the next rowid, in id order. SQLite reads the rows the statement joins before it
/// writes any (the insert reads its own table).
fn marked_anew(candidates: &str, filter: &str) -> String {
    format!(
        "INSERT OR REPLACE INTO alert_due (monitor_id, due_at, marks, steady, rule_at) \
         SELECT c.id, CASE WHEN a.due_at < $2 THEN a.due_at ELSE CAST($2 AS BIGINT) END, \
         COALESCE(a.marks, 0) + 1, 0, a.rule_at \
         FROM ({candidates}) AS c LEFT JOIN alert_due a ON a.monitor_id = c.id \
         WHERE {filter} ORDER BY 1"
    )
}

/// Locks the `alert_due` rows of `ids` in id order, on PostgreSQL (nothing when `ids` is
/// empty); nothing on SQLite (one writer at a time). For a transaction that then writes several of them in more
/// than one statement (ingest's confirmations, then its marks): each statement alone takes its
/// rows in id order, but two statements in a row do not, and a look or a placement finishing
/// the same monitors could then wait on them in a cycle.
pub(super) async fn lock_due_rows(
    tx: &mut impl Statements,
    backend: Backend,
    ids: &[&str],
) -> anyhow::Result<()> {
    if backend.writes_concurrently() && !ids.is_empty() {
        let sql = format!(
            "SELECT monitor_id FROM alert_due WHERE {} ORDER BY monitor_id FOR UPDATE",
            listed(backend, "monitor_id", "$1")
        );
        let ids = serde_json::to_string(ids)?;
        tx.execute(&sql, &[Arg::from(&ids)]).await?;
    }
    Ok(())
}

/// Ingest's marks (`mark_due`) of `ids`, sorted and unique: on SQLite one statement per
/// monitor (`statements` says why), in id order as one statement would store them.
pub(super) async fn mark_each(
    tx: &mut impl Statements,
    backend: Backend,
    ids: &[&str],
    at: i64,
) -> anyhow::Result<()> {
    debug_assert!(ids.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
    if !backend.binds_each_row() {
        return mark_due(tx, backend, &serde_json::to_string(ids)?, at).await;
    }
    let sql = marked_anew("SELECT $1 AS id", "true");
    let rows: Vec<Vec<Arg>> = ids.iter().map(|&id| vec![id.into(), at.into()]).collect();
    tx.execute_each(&sql, &rows).await?;
    Ok(())
}

/// Tells the lease holder's alerting, on PostgreSQL, that monitors were marked due: heard when
/// the transaction commits, whichever replica wrote it (`dialect::notify`).
pub(super) async fn notify_due(tx: &mut impl Statements, backend: Backend) -> anyhow::Result<()> {
    super::dialect::notify(backend, tx, super::wakeups::DUE_CHANNEL, "").await
}

/// A result that confirms its monitor's verdict: the instant before which it keeps the
/// monitor from changing with time alone (after now), and the interval that instant assumes.
#[derive(Debug, serde::Serialize)]
pub struct Confirmation<'a> {
    pub id: &'a str,
    pub until: i64,
    pub interval: i64,
}

/// How much later than its check's spacing a result may arrive without its monitor's row coming
/// due first (`confirm_due`): agents upload every 10 s by default, or once 50 are queued.
const ARRIVAL_MARGIN_MS: i64 = 30_000;

/// Confirmations (`Confirmation`): a monitor whose row is steady with the same interval and
/// not due yet is due at the earlier of `until` and its `rule_at`, with no mark and no look;
/// the others are marked due at `at` (a row already due may be under a look that read the
/// monitor before this result: the mark makes that look's write fail and the monitor be
/// looked at again). Returns whether it marked any.
///
/// A row moved to a reminder already due (`rule_at` not after `at`) needs no mark: it was not
/// due before, so no look holds it, and the next look reads this result. SQLite never marks
/// it; PostgreSQL's second statement does when another confirmation of the batch was not
/// moved, which costs that row one look more than it needs, no more.
///
/// A steady row still due later than the next result should arrive (an interval from now,
/// plus `ARRIVAL_MARGIN_MS`), and no later than `until`, is left as it is: its instant is
/// earlier than the confirmation's, which is safe (at worst a look that finds nothing new, if
/// no result came by then), and a later result moves it. A result stands for its interval
/// plus a grace of at least a minute, so at short intervals most confirmations write nothing:
/// at 5 s, one in about six moves the row; at 20 s, one in two. From 30 s on every confirmation
/// still moves it: what is left of the grace after an interval is less than the margin.
///
/// On PostgreSQL the caller has locked the rows (`lock_due_rows`): an update joined to the
/// batch would lock them in whatever order the join yields.
///
/// On PostgreSQL both statements read the rows by the batch's keys only (`listed_ids`); on
/// SQLite each reads its monitor's row by key. `due_at + 0` keeps the `due_at` index out of
/// them. With it, PostgreSQL's plan made without the values (after
/// five runs on a connection) sometimes walked that index over every row not yet due, a
/// third of the table by its guess, nearly all of it in fact (`tests/tests/e2e/store_reads.rs`
/// caught it on a busy host: 500 rows read per result).
pub(super) async fn confirm_due(
    tx: &mut impl Statements,
    backend: Backend,
    confirmed: &[Confirmation<'_>],
    at: i64,
) -> anyhow::Result<bool> {
    if confirmed.is_empty() {
        return Ok(false);
    }
    if backend.binds_each_row() {
        return confirm_each(tx, confirmed, at).await;
    }
    let rows = serde_json::to_string(confirmed)?;
    let source = super::dialect::json_rows(backend, "$1");
    let probe = listed_ids("alert_due.monitor_id", "$1", "id");
    let moved = tx
        .execute(
            &format!(
                "UPDATE alert_due SET due_at = CASE WHEN alert_due.rule_at < c.until_ms \
         THEN alert_due.rule_at ELSE c.until_ms END \
         FROM (SELECT r.value ->> 'id' AS id, CAST(r.value ->> 'until' AS BIGINT) AS until_ms, \
            CAST(r.value ->> 'interval' AS BIGINT) AS interval_ms FROM {source}) AS c \
         WHERE {probe} AND alert_due.monitor_id = c.id AND alert_due.steady = c.interval_ms \
         AND alert_due.due_at + 0 > $2 \
         AND (alert_due.due_at < $3 + c.interval_ms OR alert_due.due_at > c.until_ms)"
            ),
            &[
                Arg::from(&rows),
                at.into(),
                at.saturating_add(ARRIVAL_MARGIN_MS).into(),
            ],
        )
        .await?;
    if moved == confirmed.len() as u64 {
        return Ok(false);
    }
    // The rest: no row (nothing was due), due already, or not steady. A row left alone above
    // is steady and not due, and so is a row moved, unless to a reminder already due (see
    // above): both are left alone here.
    let sql = format!(
        "INSERT INTO alert_due (monitor_id, due_at, marks) \
         SELECT DISTINCT r.value ->> 'id', CAST($2 AS BIGINT), 1 FROM {source} \
         WHERE NOT EXISTS (SELECT 1 FROM alert_due s WHERE {} \
         AND s.monitor_id = r.value ->> 'id' \
         AND s.steady = CAST(r.value ->> 'interval' AS BIGINT) AND s.due_at + 0 > $2) \
         ORDER BY 1 \
         ON CONFLICT (monitor_id) DO UPDATE SET \
         due_at = CASE WHEN excluded.due_at < alert_due.due_at THEN excluded.due_at \
                  ELSE alert_due.due_at END, \
         marks = alert_due.marks + 1, steady = 0",
        listed_ids("s.monitor_id", "$1", "id")
    );
    let marked = tx.execute(&sql, &[Arg::from(&rows), at.into()]).await? > 0;
    if marked {
        notify_due(tx, backend).await?;
    }
    Ok(marked)
}

/// `confirm_due` on SQLite: the same two statements, one confirmation at a time (`statements`
/// says why), the second (a mark, if its filter lets it) only for the confirmations the first
/// did not move, in id order.
async fn confirm_each(
    tx: &mut impl Statements,
    confirmed: &[Confirmation<'_>],
    at: i64,
) -> anyhow::Result<bool> {
    let margin = at.saturating_add(ARRIVAL_MARGIN_MS);
    let rows: Vec<Vec<Arg>> = confirmed
        .iter()
        .map(|c| {
            vec![
                c.id.into(),
                c.until.into(),
                c.interval.into(),
                at.into(),
                margin.into(),
            ]
        })
        .collect();
    let moved = tx
        .execute_each(
            "UPDATE alert_due SET due_at = CASE WHEN rule_at < $2 THEN rule_at ELSE $2 END \
             WHERE monitor_id = $1 AND steady = $3 AND due_at + 0 > $4 \
             AND (due_at < $5 + $3 OR due_at > $2)",
            &rows,
        )
        .await?;
    let mut rest: Vec<&Confirmation> = confirmed
        .iter()
        .zip(&moved)
        .filter(|&(_, &moved)| moved == 0)
        .map(|(c, _)| c)
        .collect();
    if rest.is_empty() {
        return Ok(false);
    }
    rest.sort_by_key(|c| c.id);
    let sql = marked_anew(
        "SELECT $1 AS id, CAST($3 AS BIGINT) AS interval_ms",
        "a.monitor_id IS NULL OR a.steady <> c.interval_ms OR a.due_at <= $2",
    );
    let rows: Vec<Vec<Arg>> = rest
        .iter()
        .map(|c| vec![c.id.into(), at.into(), c.interval.into()])
        .collect();
    let marked = tx.execute_each(&sql, &rows).await?;
    Ok(marked.iter().any(|&n| n > 0))
}

/// Writes the statuses finished looks show (`Look::shown`, `Look::shown_locations`): first in
/// a look's transaction, before any alert or due row.
///
/// Every writer of a monitor's (or a location's) row that marks the monitor due takes that row
/// before its `alert_due` row (a placement, an edit, a deletion), so a look taking them the
/// other way round could deadlock with it: PostgreSQL then aborts one of the two. (The likely
/// cause of a 500 seen once in CI: a monitor created with its locations, whose new location
/// rows a look was showing as pending while their placement was being stored.)
pub(super) async fn show_looks(tx: &mut Transaction<'_, Any>, looks: &[Look]) -> sqlx::Result<()> {
    let mut shown: Vec<&Look> = looks
        .iter()
        .filter(|l| l.shown.is_some() || !l.shown_locations.is_empty())
        .collect();
    // In id order, as placements and marks take the rows.
    shown.sort_by(|a, b| a.monitor_id.cmp(&b.monitor_id));
    for look in shown {
        // Whatever came in meanwhile: it is what the look saw, and a later look corrects it.
        if let Some(shown) = look.shown {
            sqlx::query("UPDATE monitors SET shown_status = $2 WHERE id = $1")
                .bind(&look.monitor_id)
                .bind(shown.as_str())
                .execute(&mut **tx)
                .await?;
        }
        let mut locations: Vec<&(String, LocationStatus)> = look.shown_locations.iter().collect();
        locations.sort_by(|a, b| a.0.cmp(&b.0));
        for (region, shown) in locations {
            sqlx::query(
                "UPDATE monitor_locations SET shown_status = $3 WHERE monitor_id = $1 AND region = $2",
            )
            .bind(&look.monitor_id)
            .bind(region)
            .bind(shown.as_str())
            .execute(&mut **tx)
            .await?;
        }
    }
    Ok(())
}

/// Writes finished looks (after `show_looks`): each row's next instant, or its removal, unless
/// a mark came in. A monitor that shows a new status marks the monitors that depend on it due at `now` (their
/// notices wait on it: `service::alerts::look`); cost: their rows.
pub(super) async fn finish_looks(
    tx: &mut Transaction<'_, Any>,
    backend: Backend,
    looks: &[Look],
    now: i64,
) -> anyhow::Result<()> {
    let changed: Vec<&str> = looks
        .iter()
        .filter(|l| l.shown.is_some())
        .map(|l| l.monitor_id.as_str())
        .collect();
    let children: Vec<String> = if changed.is_empty() {
        Vec::new()
    } else {
        let ids = serde_json::to_string(&changed)?;
        let rows: Vec<(String,)> = sqlx::query_as(&format!(
            "SELECT DISTINCT child_id FROM monitor_parents WHERE {}",
            listed(backend, "parent_id", "$1")
        ))
        .bind(ids)
        .fetch_all(&mut **tx)
        .await?;
        rows.into_iter().map(|(id,)| id).collect()
    };
    // The rows this writes, the looks' and their children's, locked in id order first, as
    // marks and confirmations lock them: in look order they could deadlock with ingest.
    let mut ids: Vec<&str> = looks.iter().map(|l| l.monitor_id.as_str()).collect();
    ids.extend(children.iter().map(String::as_str));
    lock_due_rows(tx, backend, &ids).await?;
    for look in looks {
        let query = match look.next_at {
            Some(at) => sqlx::query(
                "UPDATE alert_due SET due_at = $3, steady = $4, rule_at = $5 \
                 WHERE monitor_id = $1 AND marks = $2",
            )
            .bind(&look.monitor_id)
            .bind(look.marks)
            .bind(at)
            .bind(look.steady.unwrap_or(0))
            .bind(look.rule_at),
            None => sqlx::query("DELETE FROM alert_due WHERE monitor_id = $1 AND marks = $2")
                .bind(&look.monitor_id)
                .bind(look.marks),
        };
        query.execute(&mut **tx).await?;
    }
    if !children.is_empty() {
        let ids = serde_json::to_string(&children).map_err(|e| sqlx::Error::Encode(e.into()))?;
        mark_due(tx, backend, &ids, now).await?;
    }
    Ok(())
}

impl Store {
    /// Marks monitors due at `at` (see `mark_due`), in a transaction of its own.
    /// Run again if PostgreSQL aborts it as a conflict (`conflicts`).
    pub async fn mark_monitors_due(&self, ids: &[String], at: i64) -> anyhow::Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids = serde_json::to_string(ids)?;
        super::conflicts::retrying("marking monitors due", || async {
            let _guard = self.write_lock().await;
            let mut tx = self.writer.begin().await?;
            mark_due(&mut tx, self.backend(), &ids, at).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Marks due at `at` every monitor placed on one of `poller_ids`, itself or by a location
    /// (their status depends on those pollers being online): indexed reads of those monitors.
    pub async fn mark_due_on_pollers(&self, poller_ids: &[String], at: i64) -> anyhow::Result<()> {
        if poller_ids.is_empty() {
            return Ok(());
        }
        let listed = |column| listed(self.backend(), column, "$1");
        let sql = format!(
            "SELECT id FROM monitors WHERE {} \
             UNION SELECT monitor_id FROM monitor_locations WHERE {}",
            listed("assigned_poller_id"),
            listed("assigned_poller_id")
        );
        let ids: Vec<(String,)> = sqlx::query_as(&sql)
            .bind(serde_json::to_string(poller_ids)?)
            .fetch_all(&self.pool)
            .await?;
        let ids: Vec<String> = ids.into_iter().map(|(id,)| id).collect();
        self.mark_monitors_due(&ids, at).await
    }

    /// Marks every monitor due at `at` (after the clock stepped back: every monitor), in id
    /// order as every marker takes them. Run again if PostgreSQL aborts it as a conflict.
    pub async fn mark_all_due(&self, at: i64) -> anyhow::Result<()> {
        super::conflicts::retrying("marking every monitor due", || async {
            let _guard = self.write_lock().await;
            sqlx::query(
                "INSERT INTO alert_due (monitor_id, due_at, marks) \
                 SELECT id, CAST($1 AS BIGINT), 1 FROM monitors WHERE true ORDER BY id \
                 ON CONFLICT (monitor_id) DO UPDATE SET due_at = excluded.due_at, \
                 marks = alert_due.marks + 1, steady = 0",
            )
            .bind(at)
            .execute(&self.writer)
            .await?;
            Ok(())
        })
        .await
    }

    /// Marks due at `at` every monitor alerting last saw `stale`: those whose poller may have
    /// come back while nobody held the lease (an indexed read of the stale ones alone).
    pub async fn mark_stale_due(&self, at: i64) -> anyhow::Result<()> {
        let ids: Vec<(String,)> =
            sqlx::query_as("SELECT monitor_id FROM alert_state WHERE status = 'stale'")
                .fetch_all(&self.pool)
                .await?;
        let ids: Vec<String> = ids.into_iter().map(|(id,)| id).collect();
        self.mark_monitors_due(&ids, at).await
    }

    /// At most `limit` monitors due by `now`, most overdue first, with their `marks`.
    pub async fn due_looks(&self, now: i64, limit: u32) -> anyhow::Result<Vec<(String, i64)>> {
        // Read packed (`packed`): one value per look, not a row per monitor.
        let sql = super::packed::packed(
            self.backend(),
            &[
                ("monitor_id", "monitor_id"),
                ("marks", "marks"),
                ("due_at", "due_at"),
            ],
            "FROM alert_due WHERE due_at <= $1 ORDER BY due_at LIMIT $2",
            "due_at",
        );
        let (text,): (String,) = sqlx::query_as(&sql)
            .bind(now)
            .bind(i64::from(limit))
            .fetch_one(&self.pool)
            .await?;
        #[derive(serde::Deserialize)]
        struct Due {
            monitor_id: String,
            marks: i64,
        }
        Ok(super::packed::unpack::<Due>(&text)?
            .into_iter()
            .map(|d| (d.monitor_id, d.marks))
            .collect())
    }

    /// The earliest instant any monitor is due (one read of the index's first entry).
    pub async fn next_due_at(&self) -> anyhow::Result<Option<i64>> {
        let (at,): (Option<i64>,) = sqlx::query_as("SELECT MIN(due_at) FROM alert_due")
            .fetch_one(&self.pool)
            .await?;
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    #[tokio::test]
    async fn a_mark_during_a_look_is_not_overwritten_and_marks_never_postpone() {
        let (store, _dir) = sqlite_store().await;
        let ids = ["a".to_string(), "b".to_string()];
        store.mark_monitors_due(&ids, 100).await.unwrap();
        // Marked later: still due at the earlier instant.
        store.mark_monitors_due(&ids[..1], 500).await.unwrap();
        // Both due at 100: in no particular order.
        let mut due = store.due_looks(100, 10).await.unwrap();
        due.sort();
        assert_eq!(due, [("a".to_string(), 2), ("b".to_string(), 1)]);
        // A result lands on `a` while the look is under way.
        store.mark_monitors_due(&ids[..1], 150).await.unwrap();
        let looks: Vec<Look> = due
            .iter()
            .map(|(id, marks)| Look {
                next_at: Some(10_000),
                ..Look::settled(id, *marks)
            })
            .collect();
        store.record_alerts(&[], &looks, 0).await.unwrap();
        assert_eq!(
            store.due_looks(200, 10).await.unwrap(),
            [("a".to_string(), 3)],
            "`a` is looked at again; `b` waits for its instant"
        );
        assert_eq!(store.next_due_at().await.unwrap(), Some(100));
        let done = Look::settled("a", 3);
        store.record_alerts(&[], &[done], 0).await.unwrap();
        assert_eq!(store.next_due_at().await.unwrap(), Some(10_000));
    }

    /// The monitors' ids in the order their rows lie in (SQLite's rowid).
    async fn row_order(store: &Store) -> Vec<String> {
        let rows: Vec<(String,)> =
            sqlx::query_as("SELECT monitor_id FROM alert_due ORDER BY rowid")
                .fetch_all(&store.pool)
                .await
                .unwrap();
        rows.into_iter().map(|(id,)| id).collect()
    }

    #[tokio::test]
    async fn marked_rows_are_stored_anew_together_at_the_end() {
        let (store, _dir) = sqlite_store().await;
        for id in ["a", "b", "c", "d", "e"] {
            store
                .mark_monitors_due(&[id.to_string()], 100)
                .await
                .unwrap();
        }
        // `c` looked at and found steady, with a reminder the marks below must keep.
        let look = Look {
            next_at: Some(10_000),
            steady: Some(60_000),
            rule_at: Some(50_000),
            ..Look::settled("c", 1)
        };
        store.record_alerts(&[], &[look], 0).await.unwrap();
        // One mark of `d` and `a`, later than they are due: together at the end, in id order,
        // still due at 100.
        store
            .mark_monitors_due(&["d".to_string(), "a".to_string()], 500)
            .await
            .unwrap();
        assert_eq!(row_order(&store).await, ["b", "c", "e", "a", "d"]);
        let due = store.due_looks(100, 10).await.unwrap();
        assert!(is_due(&due, "a", 2) && is_due(&due, "d", 2));
        // A confirmation of `c` (steady) moves its row where it is; one of `b` (not steady)
        // marks it, and so stores it anew.
        confirm(&store, &[("b", 20_000), ("c", 20_000)], 1_000).await;
        assert_eq!(row_order(&store).await, ["c", "e", "a", "d", "b"]);
        // A mark of `c` keeps its reminder and ends its steadiness.
        store
            .mark_monitors_due(&["c".to_string()], 2_000)
            .await
            .unwrap();
        let (rule_at, steady): (Option<i64>, i64) =
            sqlx::query_as("SELECT rule_at, steady FROM alert_due WHERE monitor_id = 'c'")
                .fetch_one(&store.pool)
                .await
                .unwrap();
        assert_eq!((rule_at, steady), (Some(50_000), 0));
        assert_eq!(row_order(&store).await, ["e", "a", "d", "b", "c"]);
    }

    /// Confirms each (monitor, until) with a 60 s interval at `at`.
    async fn confirm(store: &Store, confirmed: &[(&str, i64)], at: i64) {
        confirm_with(store, confirmed, 60_000, at).await;
    }

    async fn confirm_with(store: &Store, confirmed: &[(&str, i64)], interval: i64, at: i64) {
        let confirmed: Vec<Confirmation> = confirmed
            .iter()
            .map(|&(id, until)| Confirmation {
                id,
                until,
                interval,
            })
            .collect();
        let mut tx = store.pool.begin().await.unwrap();
        confirm_due(&mut tx, store.backend(), &confirmed, at)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }

    fn is_due(due: &[(String, i64)], id: &str, marks: i64) -> bool {
        due.contains(&(id.to_string(), marks))
    }

    /// A 5 s monitor whose results stand for 65 s and arrive 5 s after their check: its row
    /// moves once in six results, and is never due when a result arrives.
    #[tokio::test]
    async fn at_short_intervals_most_confirmations_leave_the_row_alone() {
        let (store, _dir) = sqlite_store().await;
        store
            .mark_monitors_due(&["a".to_string()], 0)
            .await
            .unwrap();
        let look = Look {
            next_at: Some(65_000),
            steady: Some(5_000),
            ..Look::settled("a", 1)
        };
        store.record_alerts(&[], &[look], 0).await.unwrap();
        let mut due = 65_000;
        let mut moves = 0;
        for k in 1..=14 {
            let (checked, arrived) = (5_000 * k, 5_000 * k + 5_000);
            assert!(due > arrived, "due at {due} before result {k} arrived");
            assert!(store.due_looks(arrived, 10).await.unwrap().is_empty());
            confirm_with(&store, &[("a", checked + 65_000)], 5_000, arrived).await;
            let now_due = store.next_due_at().await.unwrap().unwrap();
            if now_due != due {
                assert_eq!(now_due, checked + 65_000, "moved to the result's instant");
                moves += 1;
            }
            due = now_due;
        }
        assert_eq!(moves, 2, "one in six");
    }

    /// A confirmation that moves a steady row to its reminder, already due, does not mark it
    /// (no look held it: it was not due), even beside one that is marked.
    #[tokio::test]
    async fn a_row_moved_to_a_due_reminder_is_not_marked() {
        let (store, _dir) = sqlite_store().await;
        store
            .mark_monitors_due(&["a".to_string()], 0)
            .await
            .unwrap();
        let look = Look {
            next_at: Some(100_000),
            steady: Some(60_000),
            rule_at: Some(5_000),
            ..Look::settled("a", 1)
        };
        store.record_alerts(&[], &[look], 0).await.unwrap();
        confirm(&store, &[("a", 90_000), ("b", 90_000)], 5_000).await;
        let mut due = store.due_looks(5_000, 10).await.unwrap();
        due.sort();
        assert_eq!(due, [("a".to_string(), 1), ("b".to_string(), 1)]);
    }

    #[tokio::test]
    async fn a_confirmation_moves_a_steady_row_itself_and_marks_the_others() {
        let (store, _dir) = sqlite_store().await;
        let ids = ["a".to_string(), "b".to_string()];
        store.mark_monitors_due(&ids, 100).await.unwrap();
        // `a` looked at and found steady (60 s interval), with a reminder at 50,000; `b` not.
        let steady = |id: &str, marks: i64| Look {
            next_at: Some(10_000),
            steady: Some(60_000),
            rule_at: Some(50_000),
            ..Look::settled(id, marks)
        };
        let looks = [
            steady("a", 1),
            Look {
                next_at: Some(10_000),
                ..Look::settled("b", 1)
            },
        ];
        store.record_alerts(&[], &looks, 0).await.unwrap();
        confirm(
            &store,
            &[("a", 20_000), ("b", 20_000), ("c", 20_000)],
            1_000,
        )
        .await;
        let mut due = store.due_looks(19_999, 10).await.unwrap();
        due.sort();
        assert_eq!(
            due,
            [("b".to_string(), 2), ("c".to_string(), 1)],
            "`a` moved to its result's instant without a mark; the others are marked"
        );
        assert!(is_due(&store.due_looks(20_000, 10).await.unwrap(), "a", 1));
        // A later confirmation: the reminder comes first.
        confirm(&store, &[("a", 60_000)], 2_000).await;
        assert!(!store
            .due_looks(49_999, 10)
            .await
            .unwrap()
            .iter()
            .any(|(id, _)| id == "a"));
        assert!(is_due(&store.due_looks(50_000, 10).await.unwrap(), "a", 1));
        // Due already (a look may have read it before this result): marked, not moved on.
        confirm(&store, &[("a", 90_000)], 50_000).await;
        assert!(is_due(&store.due_looks(50_000, 10).await.unwrap(), "a", 2));
        // Worked out with another interval than the look saw (an edit in between): marked.
        store
            .record_alerts(&[], &[steady("a", 2)], 0)
            .await
            .unwrap();
        confirm_with(&store, &[("a", 90_000)], 3_600_000, 2_000).await;
        assert!(is_due(&store.due_looks(10_000, 10).await.unwrap(), "a", 3));
        // Due more than an interval from now, and no later than the confirmation's instant:
        // left alone (no write, no mark) until a later result finds less than an interval.
        let far = Look {
            next_at: Some(100_000),
            rule_at: None,
            ..steady("a", 3)
        };
        store.record_alerts(&[], &[far], 0).await.unwrap();
        // The first instant `a` is due at, from `at` on (marks unchanged: 3).
        let a_due_from = |at: i64| {
            let store = &store;
            async move {
                let mut t = at;
                while !is_due(&store.due_looks(t, 10).await.unwrap(), "a", 3) {
                    t += 1_000;
                }
                t
            }
        };
        // 98 s ahead: more than the interval and the margin (90 s).
        confirm(&store, &[("a", 130_000)], 2_000).await;
        assert_eq!(a_due_from(2_000).await, 100_000, "neither moved nor marked");
        // 80 s ahead: the next result might come too late, so it is moved.
        confirm(&store, &[("a", 140_000)], 20_000).await;
        assert_eq!(a_due_from(20_000).await, 140_000);
        // A confirmation earlier than the row's instant (an older result arriving late)
        // still moves it: the row is never later than a confirmation says.
        confirm(&store, &[("a", 110_000)], 21_000).await;
        assert_eq!(a_due_from(21_000).await, 110_000);
        // A mark ends `a`'s steadiness: confirmations no longer move it on.
        store
            .record_alerts(&[], &[steady("a", 3)], 0)
            .await
            .unwrap();
        store.mark_monitors_due(&ids[..1], 3_000).await.unwrap();
        confirm(&store, &[("a", 70_000)], 4_000).await;
        assert!(is_due(&store.due_looks(3_000, 10).await.unwrap(), "a", 5));
    }
}
