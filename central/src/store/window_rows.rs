//! A maintenance window's row and the `domain::MaintenanceWindow` read from it: the lists as
//! JSON arrays, the recurrence as three columns, `notify` as text, and their one translation
//! each way. Must not: run a statement (`store::maintenance` does, with these).

use shared_proto::maintenance::{MaintenanceNotify, Recurrence};
use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use crate::domain::MaintenanceWindow;

pub(super) const COLUMNS: &str =
    "id, name, starts_at, ends_at, rule, time_zone, duration_ms, until_at, \
     monitor_ids, poller_ids, regions, notify, created_at, updated_at, tags, stop_checks";

/// A window as stored; the lists are JSON arrays.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub(super) struct WindowRow {
    pub id: String,
    pub name: String,
    pub starts_at: i64,
    pub ends_at: Option<i64>,
    pub rule: Option<String>,
    pub time_zone: Option<String>,
    pub duration_ms: Option<i64>,
    /// When its last occurrence ends; `None` while it recurs without end.
    pub until_at: Option<i64>,
    pub monitor_ids: String,
    pub poller_ids: String,
    pub regions: String,
    /// JSON array of tags.
    pub tags: String,
    pub notify: String,
    /// Whether the monitors it names by id or tag go unchecked while it is under way.
    #[serde(deserialize_with = "super::packed::flag")]
    pub stop_checks: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

impl FromRow<'_, AnyRow> for WindowRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            starts_at: row.try_get("starts_at")?,
            ends_at: row.try_get("ends_at")?,
            rule: row.try_get("rule")?,
            time_zone: row.try_get("time_zone")?,
            duration_ms: row.try_get("duration_ms")?,
            until_at: row.try_get("until_at")?,
            monitor_ids: row.try_get("monitor_ids")?,
            poller_ids: row.try_get("poller_ids")?,
            regions: row.try_get("regions")?,
            tags: row.try_get("tags")?,
            notify: row.try_get("notify")?,
            stop_checks: row.try_get::<i64, _>("stop_checks")? != 0,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    }
}

fn notify_text(notify: MaintenanceNotify) -> &'static str {
    match notify {
        MaintenanceNotify::None => "none",
        MaintenanceNotify::Recoveries => "recoveries",
    }
}

impl TryFrom<WindowRow> for MaintenanceWindow {
    type Error = anyhow::Error;

    /// Reads the row's encodings once: a text central never writes (a hand-edited database)
    /// is an error naming the window and the column.
    fn try_from(row: WindowRow) -> anyhow::Result<MaintenanceWindow> {
        let id = row.id.clone();
        let unread = move |column: &str, why: &dyn std::fmt::Display| {
            anyhow::anyhow!("maintenance window {id}: stored {column} does not read: {why}")
        };
        let list = |column: &str, text: &str| -> anyhow::Result<Vec<String>> {
            serde_json::from_str(text).map_err(|e| unread(column, &e))
        };
        // A recurrence is its three columns together; without one of them the window is one
        // that happens once (its `ends_at`), or none (`service::maintenance` leaves it out).
        let recurrence = match (row.rule, row.time_zone, row.duration_ms) {
            (Some(rule), Some(time_zone), Some(duration_ms)) => Some(Recurrence {
                rule,
                time_zone,
                duration_ms: duration_ms.max(0) as u64,
            }),
            _ => None,
        };
        Ok(MaintenanceWindow {
            monitor_ids: list("monitor_ids", &row.monitor_ids)?,
            poller_ids: list("poller_ids", &row.poller_ids)?,
            regions: list("regions", &row.regions)?,
            tags: list("tags", &row.tags)?,
            // `none` lets nothing through; anything else (a choice a newer replica added) lets
            // recoveries through, the default, rather than dropping the whole window.
            notify: if row.notify == notify_text(MaintenanceNotify::None) {
                MaintenanceNotify::None
            } else {
                MaintenanceNotify::Recoveries
            },
            id: row.id,
            name: row.name,
            starts_at: row.starts_at,
            ends_at: row.ends_at,
            recurrence,
            until_at: row.until_at,
            stop_checks: row.stop_checks,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

/// The columns of a window written that are encoded: the lists as JSON arrays, `notify`.
pub(super) struct WindowColumns {
    pub(super) monitor_ids: String,
    pub(super) poller_ids: String,
    pub(super) regions: String,
    pub(super) tags: String,
    pub(super) notify: &'static str,
}

impl WindowColumns {
    /// A stored row's columns as they are (a deleted window's scope, whether it reads or not).
    pub(super) fn of_row(row: WindowRow) -> WindowColumns {
        WindowColumns {
            monitor_ids: row.monitor_ids,
            poller_ids: row.poller_ids,
            regions: row.regions,
            tags: row.tags,
            notify: "",
        }
    }

    pub(super) fn of(window: &MaintenanceWindow) -> anyhow::Result<WindowColumns> {
        Ok(WindowColumns {
            monitor_ids: serde_json::to_string(&window.monitor_ids)?,
            poller_ids: serde_json::to_string(&window.poller_ids)?,
            regions: serde_json::to_string(&window.regions)?,
            tags: serde_json::to_string(&window.tags)?,
            notify: notify_text(window.notify),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::readable::readable;

    fn row() -> WindowRow {
        WindowRow {
            id: "w".into(),
            name: "patch night".into(),
            starts_at: 1_000,
            ends_at: None,
            rule: Some("FREQ=WEEKLY;BYDAY=SU".into()),
            time_zone: Some("Europe/Berlin".into()),
            duration_ms: Some(3_600_000),
            until_at: None,
            monitor_ids: r#"["m1"]"#.into(),
            poller_ids: "[]".into(),
            regions: r#"["eu"]"#.into(),
            tags: r#"["db"]"#.into(),
            notify: "none".into(),
            stop_checks: true,
            created_at: 1,
            updated_at: 2,
        }
    }

    /// A window is read as central writes it, and written back as it was read; a list that does
    /// not read is an error naming the window and the column, and a read of many leaves that
    /// window out. A `notify` this central does not know (a newer replica's) lets recoveries
    /// through, the default; a recurrence missing a column is none.
    #[test]
    fn a_window_reads_typed_and_round_trips_and_a_stray_text_is_refused() {
        let window = MaintenanceWindow::try_from(row()).unwrap();
        assert_eq!(window.notify, MaintenanceNotify::None);
        assert_eq!(window.recurrence.as_ref().unwrap().duration_ms, 3_600_000);
        assert_eq!(
            (window.monitor_ids.as_slice(), window.tags.as_slice()),
            (&["m1".to_string()][..], &["db".to_string()][..])
        );
        let odd = MaintenanceWindow::try_from(WindowRow {
            notify: "later".into(),
            time_zone: None,
            ..row()
        })
        .unwrap();
        assert_eq!(
            (odd.notify, odd.recurrence),
            (MaintenanceNotify::Recoveries, None)
        );
        let written = WindowColumns::of(&window).unwrap();
        let stored = row();
        assert_eq!(
            (
                written.monitor_ids.as_str(),
                written.regions.as_str(),
                written.notify
            ),
            (stored.monitor_ids.as_str(), stored.regions.as_str(), "none")
        );
        type Stray = fn(&mut WindowRow);
        let strays: [(&str, Stray); 2] = [
            ("tags", |r| r.tags = "db".into()),
            ("monitor_ids", |r| r.monitor_ids = "{}".into()),
        ];
        for (column, stray) in strays {
            let mut bad = row();
            stray(&mut bad);
            let said = format!(
                "{:#}",
                MaintenanceWindow::try_from(bad.clone()).unwrap_err()
            );
            assert!(said.contains("window w") && said.contains(column), "{said}");
            let read: Vec<MaintenanceWindow> = readable(
                "maintenance window",
                vec![
                    bad,
                    WindowRow {
                        id: "v".into(),
                        ..row()
                    },
                ],
            );
            assert_eq!(
                read.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
                ["v"]
            );
        }
    }
}
