//! What alerting remembers of each monitor (`alert_state`): its row, the one translation each
//! way to `domain::AlertState`, and the transaction that writes changed states with the
//! notifications they cause, so a notification is never lost nor made twice by a restart.
//! Must not: decide what is told (`service::alerts`).

use shared_proto::settings_api::MonitorStatus;
use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::notifications::insert_outbox;
use super::Store;
use crate::domain::{AlertState, QueuedNotification};

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct AlertStateRow {
    monitor_id: String,
    status: String,
    since: i64,
    notified_status: Option<String>,
    notified_at: Option<i64>,
    /// JSON array of the times of recent status changes.
    changes: String,
}

impl FromRow<'_, AnyRow> for AlertStateRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            monitor_id: row.try_get("monitor_id")?,
            status: row.try_get("status")?,
            since: row.try_get("since")?,
            notified_status: row.try_get("notified_status")?,
            notified_at: row.try_get("notified_at")?,
            changes: row.try_get("changes")?,
        })
    }
}

/// A monitor's alert state as read, with what its next write compares against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAlertState {
    pub monitor_id: String,
    pub state: AlertState,
    /// Passed back as the state an update replaces (`AlertUpdate::replaces`).
    pub read_as: ReadAs,
}

/// The stored texts a change of state compares against (a compare-and-set): those read, not
/// the state made of them, so that a status this central does not know (a newer replica's)
/// is still replaced exactly once, by one replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadAs {
    status: String,
    notified_status: Option<String>,
    notified_at: Option<i64>,
}

impl From<AlertStateRow> for StoredAlertState {
    /// A status no central of this version writes (a newer one's, after a downgrade) reads as
    /// `pending`, which tells nothing; changes that do not read as none recent. The next
    /// look rewrites both.
    fn from(row: AlertStateRow) -> StoredAlertState {
        let status = |text: &str| MonitorStatus::parse(text).unwrap_or(MonitorStatus::Pending);
        StoredAlertState {
            state: AlertState {
                status: status(&row.status),
                since: row.since,
                notified_status: row.notified_status.as_deref().map(status),
                notified_at: row.notified_at,
                changes: serde_json::from_str(&row.changes).unwrap_or_default(),
            },
            read_as: ReadAs {
                status: row.status,
                notified_status: row.notified_status,
                notified_at: row.notified_at,
            },
            monitor_id: row.monitor_id,
        }
    }
}

/// A monitor's new alert state, the one it replaces (`None`: the monitor had none), and the
/// notifications the change makes.
#[derive(Debug, Clone)]
pub struct AlertUpdate {
    pub monitor_id: String,
    pub state: AlertState,
    pub replaces: Option<ReadAs>,
    pub notifications: Vec<QueuedNotification>,
}

impl Store {
    /// The alert states of these monitors (those that have one).
    pub async fn alert_states_of(&self, ids: &[String]) -> anyhow::Result<Vec<StoredAlertState>> {
        let rows: Vec<AlertStateRow> = self
            .packed_where_in(
                "monitor_id, status, since, notified_status, notified_at, changes",
                "FROM alert_state WHERE",
                "monitor_id",
                ids,
            )
            .await?;
        Ok(rows.into_iter().map(StoredAlertState::from).collect())
    }

    /// Applies alert-state changes with their notifications, and the looks that decided them
    /// (`due::show_looks` first, `due::finish_looks` last), in one transaction. Each change is
    /// a compare-and-set on the state it replaces, so if two replicas decide the same change
    /// only one writes it (and its notifications); returns how many applied.
    ///
    /// Run again if PostgreSQL aborts it as a conflict (`conflicts`).
    pub async fn record_alerts(
        &self,
        updates: &[AlertUpdate],
        looks: &[super::due::Look],
        now: i64,
    ) -> anyhow::Result<usize> {
        super::conflicts::retrying("recording alerts", || {
            self.record_alerts_once(updates, looks, now)
        })
        .await
    }

    /// One try of `record_alerts`.
    async fn record_alerts_once(
        &self,
        updates: &[AlertUpdate],
        looks: &[super::due::Look],
        now: i64,
    ) -> anyhow::Result<usize> {
        if updates.is_empty() && looks.is_empty() {
            return Ok(0);
        }
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        super::due::show_looks(&mut tx, looks).await?;
        let mut applied = 0;
        for update in updates {
            let state = &update.state;
            let changes = serde_json::to_string(&state.changes)?;
            let done = match &update.replaces {
                None => sqlx::query(
                    "INSERT INTO alert_state (monitor_id, status, since, notified_status, \
                     notified_at, changes) VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (monitor_id) DO NOTHING",
                ),
                Some(_) => sqlx::query(
                    "UPDATE alert_state SET status = $2, since = $3, notified_status = $4, \
                     notified_at = $5, changes = $6 WHERE monitor_id = $1 AND status = $7 \
                     AND COALESCE(notified_status, '') = $8 AND COALESCE(notified_at, 0) = $9",
                ),
            }
            .bind(&update.monitor_id)
            .bind(state.status.as_str())
            .bind(state.since)
            .bind(state.notified_status.map(MonitorStatus::as_str))
            .bind(state.notified_at)
            .bind(&changes);
            let done = match &update.replaces {
                None => done,
                Some(old) => done
                    .bind(&old.status)
                    .bind(old.notified_status.clone().unwrap_or_default())
                    .bind(old.notified_at.unwrap_or(0)),
            }
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 1 {
                insert_outbox(&mut tx, &update.notifications).await?;
                applied += 1;
            }
        }
        super::due::finish_looks(&mut tx, self.backend(), looks, now).await?;
        tx.commit().await?;
        Ok(applied)
    }
}

#[cfg(test)]
mod tests {
    use shared_proto::settings_api::MonitorStatus;

    use super::AlertUpdate;
    use crate::domain::AlertState;
    use crate::store::testing::sqlite_store;

    /// A status this central does not know (a newer replica's, after a rollback) reads as
    /// `pending`, and the next change replaces it exactly once: the compare-and-set compares
    /// the texts read, not the state made of them, so a second replica deciding the same
    /// change from the same read writes nothing.
    #[tokio::test]
    async fn an_alert_state_central_does_not_know_is_replaced_once() {
        let (store, _dir) = sqlite_store().await;
        sqlx::query(
            "INSERT INTO alert_state (monitor_id, status, since, notified_status, notified_at, \
             changes) VALUES ('m', 'sideways', 5, 'sideways', 6, '[5]')",
        )
        .execute(&store.writer)
        .await
        .unwrap();
        let read = store.alert_states_of(&["m".into()]).await.unwrap();
        let [stored] = read.as_slice() else {
            panic!("{read:?}")
        };
        assert_eq!(
            stored.state,
            AlertState {
                status: MonitorStatus::Pending,
                since: 5,
                notified_status: Some(MonitorStatus::Pending),
                notified_at: Some(6),
                changes: vec![5],
            }
        );
        let update = AlertUpdate {
            monitor_id: "m".into(),
            state: AlertState {
                status: MonitorStatus::Down,
                since: 10,
                notified_status: Some(MonitorStatus::Down),
                notified_at: Some(10),
                changes: vec![5, 10],
            },
            replaces: Some(stored.read_as.clone()),
            notifications: Vec::new(),
        };
        assert_eq!(
            store
                .record_alerts(std::slice::from_ref(&update), &[], 10)
                .await
                .unwrap(),
            1
        );
        assert_eq!(
            store
                .record_alerts(std::slice::from_ref(&update), &[], 11)
                .await
                .unwrap(),
            0
        );
        let now = store.alert_states_of(&["m".into()]).await.unwrap();
        assert_eq!(now[0].state, update.state);
    }
}
