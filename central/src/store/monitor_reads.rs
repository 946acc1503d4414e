//! Monitors read: one by id, a page of the list under filters, the ones a poller runs, the
//! ones carrying a tag, a monitor's children and ancestors, and a monitor's newest status.
//! Writing monitors is `store::monitors`'; nothing here writes.

use shared_proto::poller_api::{ResultStatus, Verdict};
use shared_proto::settings_api::MonitorStatus;

use crate::domain::Monitor;

use super::monitor_rows::{each_monitor_of, MonitorRow, MONITOR_COLUMNS};
use super::monitors::ANCESTORS;
use super::readable::readable;
use super::{Cursor, Paged, Store};

/// What a page of the monitor list keeps (`Store::list_monitors`); `None` keeps all.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListFilter<'a> {
    /// The status alerting's last look showed.
    pub shown: Option<MonitorStatus>,
    /// Running in this region (placed on a poller of it, meant for it, or a location there).
    pub region: Option<&'a str>,
    /// Carrying this tag.
    pub tag: Option<&'a str>,
}

/// The newest result of a monitor.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct StatusRow {
    /// The newest verdict (`up`/`down`), or rate-limited while there is none.
    pub status: ResultStatus,
    /// The confirmed verdict, `None` while none is confirmed.
    pub confirmed: Option<Verdict>,
    /// How many results equal to `status` end the sequence of verdicts.
    pub run_length: i64,
    pub poller_id: String,
    pub last_result_at: i64,
    /// The newest result's own status, which stands for the time after it
    /// (`service::uptime`); `status` is the newest verdict.
    pub newest_status: ResultStatus,
    pub latency_ms: Option<i64>,
    pub message: String,
    pub next_due_at: Option<i64>,
}

impl Store {
    pub async fn monitor(&self, id: &str) -> anyhow::Result<Option<Monitor>> {
        let sql = format!("SELECT {MONITOR_COLUMNS} FROM monitors WHERE id = $1");
        let row: Option<MonitorRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(Monitor::try_from).transpose()
    }

    /// A page of monitors in list order (`created_at`, then id) after `after` that pass
    /// `filter`. The database walks the list's index and checks each filter per row: the
    /// status against `shown_status` (index `monitors_shown_status`), the region against the
    /// sets of its pollers and locations (read once per statement, the latter through
    /// `monitor_locations_region`), the tag against the set of its monitors (the primary key
    /// of `monitor_tags`); nothing is derived per row.
    pub async fn list_monitors(
        &self,
        filter: &ListFilter<'_>,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Paged<Monitor>> {
        let mut filters = String::new();
        let mut next = 4;
        if filter.shown.is_some() {
            filters.push_str(&format!(" AND shown_status = ${next}"));
            next += 1;
        }
        if filter.region.is_some() {
            filters.push_str(&format!(
                " AND (poller_region = ${next} \
                 OR assigned_poller_id IN (SELECT id FROM pollers WHERE region = ${next}) \
                 OR id IN (SELECT monitor_id FROM monitor_locations WHERE region = ${next}))"
            ));
            next += 1;
        }
        if filter.tag.is_some() {
            filters.push_str(&format!(
                " AND id IN (SELECT monitor_id FROM monitor_tags WHERE tag = ${next})"
            ));
        }
        let sql = format!(
            "SELECT {MONITOR_COLUMNS} FROM monitors \
             WHERE (created_at > $1 OR (created_at = $1 AND id > $2)){filters} \
             ORDER BY created_at, id LIMIT $3"
        );
        let mut query = sqlx::query_as::<_, MonitorRow>(&sql)
            .bind(after.key)
            .bind(&after.id)
            .bind(i64::from(limit));
        for value in [
            filter.shown.map(MonitorStatus::as_str),
            filter.region,
            filter.tag,
        ]
        .into_iter()
        .flatten()
        {
            query = query.bind(value);
        }
        let rows = query.fetch_all(&self.pool).await?;
        Ok(Paged::of("monitor", rows, limit, |r| Cursor {
            key: r.created_at,
            id: r.id.clone(),
        }))
    }

    /// The first `limit` monitors (by name) that depend on `parent_id`, as (id, name), and how
    /// many there are (through `monitor_parents`' primary key).
    pub async fn children_of(
        &self,
        parent_id: &str,
        limit: u32,
    ) -> anyhow::Result<(Vec<(String, String)>, i64)> {
        let named: Vec<(String, String)> = sqlx::query_as(
            "SELECT m.id, m.name FROM monitor_parents p JOIN monitors m ON m.id = p.child_id \
             WHERE p.parent_id = $1 ORDER BY m.name, m.id LIMIT $2",
        )
        .bind(parent_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let (count,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM monitor_parents WHERE parent_id = $1")
                .bind(parent_id)
                .fetch_one(&self.pool)
                .await?;
        Ok((named, count))
    }

    /// Whether `target` is `from` or one of its ancestors (`from` depends on it, however far
    /// up): naming `from` as a parent of `target` would make a cycle.
    pub async fn depends_on(&self, from: &str, target: &str) -> anyhow::Result<bool> {
        if from == target {
            return Ok(true);
        }
        let (count,): (i64,) = sqlx::query_as(&format!("{ANCESTORS} WHERE id = $2"))
            .bind(from)
            .bind(target)
            .fetch_one(&self.pool)
            .await?;
        Ok(count > 0)
    }

    /// The ids of the monitors carrying `tag`, through `monitor_tags`' primary key: what a
    /// pause or resume by tag changes.
    pub async fn monitors_tagged(&self, tag: &str) -> anyhow::Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT monitor_id FROM monitor_tags WHERE tag = $1 ORDER BY monitor_id",
        )
        .bind(tag)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    /// Every monitor, for placement.
    pub async fn all_monitors(&self) -> anyhow::Result<Vec<Monitor>> {
        let sql = format!("SELECT {MONITOR_COLUMNS} FROM monitors");
        Ok(readable(
            "monitor",
            sqlx::query_as::<_, MonitorRow>(&sql)
                .fetch_all(&self.pool)
                .await?,
        ))
    }

    /// The unpaused monitors a poller should run now: those placed on it, and those with a
    /// location on it; an error if one does not read (`monitor_rows::each_monitor_of`).
    pub async fn monitors_assigned_to(&self, poller_id: &str) -> anyhow::Result<Vec<Monitor>> {
        let sql = format!(
            "SELECT {MONITOR_COLUMNS} FROM monitors \
             WHERE (assigned_poller_id = $1 OR id IN \
                 (SELECT monitor_id FROM monitor_locations WHERE assigned_poller_id = $1)) \
             AND paused = 0 ORDER BY id"
        );
        each_monitor_of(
            sqlx::query_as(&sql)
                .bind(poller_id)
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// The monitors among `ids` (one that does not read is left out, logged).
    pub async fn monitors_by_ids(&self, ids: &[String]) -> anyhow::Result<Vec<Monitor>> {
        let rows: Vec<MonitorRow> = self
            .packed_where_in(MONITOR_COLUMNS, "FROM monitors WHERE", "id", ids)
            .await?;
        Ok(readable("monitor", rows))
    }

    /// The monitors among `ids` as a poller is sent them: an error if one does not read
    /// (`monitor_rows::each_monitor_of`), never left out.
    pub async fn monitors_to_send(&self, ids: &[String]) -> anyhow::Result<Vec<Monitor>> {
        let rows: Vec<MonitorRow> = self
            .packed_where_in(MONITOR_COLUMNS, "FROM monitors WHERE", "id", ids)
            .await?;
        each_monitor_of(rows)
    }

    pub async fn monitor_status(&self, monitor_id: &str) -> anyhow::Result<Option<StatusRow>> {
        let sql = format!(
            "SELECT {} FROM monitor_status WHERE monitor_id = $1",
            super::locations::STATUS_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(monitor_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row
            .map(|row| super::locations::status_row(&row))
            .transpose()?)
    }
}

#[cfg(test)]
mod list_tests {
    use crate::store::testing::sqlite_store;
    use crate::store::{Cursor, ListFilter};

    fn kept<'a>(
        shown: Option<&'a str>,
        region: Option<&'a str>,
        tag: Option<&'a str>,
    ) -> ListFilter<'a> {
        let shown = shown.map(|s| shared_proto::settings_api::MonitorStatus::parse(s).unwrap());
        ListFilter { shown, region, tag }
    }

    #[tokio::test]
    async fn the_list_filters_by_shown_status_and_region_in_the_database() {
        let (store, _dir) = sqlite_store().await;
        sqlx::query(
            "INSERT INTO pollers (id, name, region, capabilities, created_at) \
             VALUES ('p-eu', 'eu one', 'eu', 'http', 0), ('p-us', 'us one', 'us', 'http', 0)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        // a: placed on the eu poller; b: meant for eu, not placed; c: a location in eu;
        // d: on the us poller; e: a location in us only.
        sqlx::query(
            "INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
                poller_mode, poller_region, assigned_poller_id, created_at, updated_at, \
                revision, shown_status) VALUES \
             ('a', 'a', 'http', 'http://x', 60000, 10000, '{}', 'auto', NULL, 'p-eu', 1, 1, 1, 'down'), \
             ('b', 'b', 'http', 'http://x', 60000, 10000, '{}', 'grouped', 'eu', NULL, 2, 2, 1, 'up'), \
             ('c', 'c', 'http', 'http://x', 60000, 10000, '{}', 'multi', NULL, NULL, 3, 3, 1, 'down'), \
             ('d', 'd', 'http', 'http://x', 60000, 10000, '{}', 'auto', NULL, 'p-us', 4, 4, 1, 'down'), \
             ('e', 'e', 'http', 'http://x', 60000, 10000, '{}', 'multi', NULL, NULL, 5, 5, 1, 'up')",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO monitor_locations (monitor_id, region) VALUES ('c', 'eu'), ('c', 'us'), \
             ('e', 'us')",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let ids = |rows: Vec<crate::domain::Monitor>| -> Vec<String> {
            rows.into_iter().map(|m| m.id).collect()
        };
        let start = Cursor::start();
        let all = store
            .list_monitors(&kept(None, None, None), &start, 10)
            .await
            .unwrap();
        assert_eq!(ids(all.items), ["a", "b", "c", "d", "e"]);
        let eu = store
            .list_monitors(&kept(None, Some("eu"), None), &start, 10)
            .await
            .unwrap();
        assert_eq!(ids(eu.items), ["a", "b", "c"]);
        let down_in_us = store
            .list_monitors(&kept(Some("down"), Some("us"), None), &start, 10)
            .await
            .unwrap();
        assert_eq!(ids(down_in_us.items), ["c", "d"]);
        let after_a = Cursor {
            key: 1,
            id: "a".into(),
        };
        let down = store
            .list_monitors(&kept(Some("down"), None, None), &after_a, 1)
            .await
            .unwrap();
        assert_eq!(ids(down.items), ["c"]);
        sqlx::query(
            "INSERT INTO monitor_tags (tag, monitor_id) VALUES ('team:db', 'b'), ('team:db', 'd'), \
             ('env:prod', 'd')",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let db = store
            .list_monitors(&kept(None, None, Some("team:db")), &start, 10)
            .await
            .unwrap();
        assert_eq!(ids(db.items), ["b", "d"]);
        let db_down_in_us = store
            .list_monitors(&kept(Some("down"), Some("us"), Some("team:db")), &start, 10)
            .await
            .unwrap();
        assert_eq!(ids(db_down_in_us.items), ["d"]);
        assert_eq!(store.monitors_tagged("team:db").await.unwrap(), ["b", "d"]);
        assert!(store.monitors_tagged("team").await.unwrap().is_empty());
    }

    /// A monitor is read as central writes it: its kind, mode, lists and shown status typed
    /// once in the store; a text central never writes (a hand-edited database) is an error
    /// naming the monitor and the column, never passed up as it stands, and a read of many
    /// leaves that monitor out rather than failing for all of them.
    #[tokio::test]
    async fn a_monitor_is_read_typed_and_a_text_central_never_writes_is_refused() {
        use shared_proto::settings_api::MonitorStatus;
        use shared_proto::{CheckKind, PollerMode};

        let (store, _dir) = sqlite_store().await;
        sqlx::query(
            "INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
                poller_mode, poller_regions, tags, created_at, updated_at, revision, \
                shown_status) VALUES ('a', 'a', 'heartbeat', '', 60000, 10000, \
                '{\"grace_ms\": 5000}', 'multi', '[\"eu\",\"us\"]', '[\"db\"]', 1, 1, 1, 'down')",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let read = store.monitor("a").await.unwrap().unwrap();
        assert_eq!(read.kind, CheckKind::Heartbeat);
        assert_eq!(read.poller_mode, PollerMode::Multi);
        assert_eq!(read.regions(), ["eu", "us"]);
        assert_eq!(read.tags, ["db"]);
        assert!(read.channel_ids.is_empty() && read.parent_ids.is_empty());
        assert_eq!(read.settings["grace_ms"], 5000);
        assert_eq!(read.shown_status, Some(MonitorStatus::Down));
        // What the last look showed is a cache: a status this central does not know (a newer
        // replica's) is none shown yet, and the monitor is read.
        sqlx::query("UPDATE monitors SET shown_status = 'sideways' WHERE id = 'a'")
            .execute(&store.writer)
            .await
            .unwrap();
        assert_eq!(
            store.monitor("a").await.unwrap().unwrap().shown_status,
            None
        );
        sqlx::query("UPDATE monitors SET shown_status = 'down' WHERE id = 'a'")
            .execute(&store.writer)
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
                poller_mode, created_at, updated_at, revision) \
                VALUES ('b', 'b', 'http', 'http://x', 60000, 10000, '{}', 'auto', 2, 2, 1)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let ids = |monitors: Vec<crate::domain::Monitor>| -> Vec<String> {
            monitors.into_iter().map(|m| m.id).collect()
        };
        for (column, text) in [
            ("kind", "<script>"),
            ("poller_mode", "region"),
            ("settings", "[1]"),
            ("tags", "{\"not\": \"a list\"}"),
            ("poller_regions", "[\"eu\""),
        ] {
            let sql = format!("UPDATE monitors SET {column} = $1 WHERE id = 'a'");
            let before: (String,) =
                sqlx::query_as(&format!("SELECT {column} FROM monitors WHERE id = 'a'"))
                    .fetch_one(&store.pool)
                    .await
                    .unwrap();
            sqlx::query(&sql)
                .bind(text)
                .execute(&store.writer)
                .await
                .unwrap();
            let error = store.monitor("a").await.unwrap_err();
            let said = format!("{error:#}");
            assert!(
                said.contains("monitor a") && said.contains(column),
                "{said}"
            );
            let all = store.all_monitors().await.unwrap();
            assert_eq!(ids(all), ["b"], "{column}: the others are still read");
            // A page whose one row does not read is empty, and the list goes on past it.
            let first = store
                .list_monitors(&ListFilter::default(), &Cursor::start(), 1)
                .await
                .unwrap();
            assert!(first.items.is_empty(), "{column}");
            let next = first.next.expect("the list goes on past a row left out");
            let second = store
                .list_monitors(&ListFilter::default(), &next, 1)
                .await
                .unwrap();
            assert_eq!(ids(second.items), ["b"], "{column}");
            sqlx::query(&sql)
                .bind(&before.0)
                .execute(&store.writer)
                .await
                .unwrap();
            assert!(store.monitor("a").await.is_ok());
        }
    }
}
