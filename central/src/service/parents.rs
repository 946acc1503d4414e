//! Dependencies between monitors (`parent_ids`): a monitor behind a switch, a host or a
//! database names them as its parents. While a parent is down (degraded, stale or in
//! maintenance), a failing child is shown "because <parent> is down" and its own problem is not
//! told: the parent's notice names the monitors behind it. When the parent recovers, what
//! still fails behind it is told then.
//!
//! A child that fails a moment before its parent does (both checked on their own clocks) waits
//! for the parent's next result, at most its interval, timeout and `SLACK_MS`: one dead switch is one
//! notice, not one per monitor behind it that happened to be checked first. Likewise, when a
//! parent recovers, a child whose newest result is older than the recovery waits for its own
//! next one: it may be recovering with the parent.
//!
//! Owns: the rule (`behind`, pure, with its tests), the checks of a monitor's `parent_ids`
//! (they exist, are not itself, make no cycle) and the list a parent's notice carries. Must not:
//! store anything (`store::monitors` keeps `monitor_parents`) or decide notices (alerting asks
//! `behind` and holds).
//!
//! Cost: a child's checks read its parents' rows and newest results (a batch per look round);
//! a parent's change of shown status marks its children due (`store::due::finish_looks`); a
//! cycle check walks the ancestors of the parents named (`store::depends_on`).

use std::collections::HashMap;
use std::sync::Arc;

use shared_proto::notifications::Subject;
use shared_proto::poller_api::Verdict;
use shared_proto::settings_api::MonitorStatus;
use shared_proto::ValidationError;
use uuid::Uuid;

use super::{stored_id, App};
use crate::domain::Monitor;
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{LinkConflict, StatusRow, Store};

/// How long past a monitor's expected next result (its interval and timeout after its newest)
/// a child waits for it: agents upload in batches (every 10 s by default), so a result arrives
/// a while after its check.
pub const SLACK_MS: i64 = 15_000;

/// The most children a parent's notice names (it counts the rest).
pub const MAX_NAMED: usize = 20;

/// A parent as the rule sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parent {
    pub name: String,
    /// The status it showed at alerting's last look.
    pub shown: Option<MonitorStatus>,
    /// Its newest verdict, confirmed or not, and when its newest result was.
    pub newest: Option<Verdict>,
    pub last_result_at: Option<i64>,
    pub interval_ms: i64,
    pub timeout_ms: i64,
    /// When its newest run of up results began, while it is up.
    pub up_since: Option<i64>,
}

/// A failing child as the rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Child {
    pub status: MonitorStatus,
    /// When its failing run began (`run_since`), if it is checked.
    pub failing_since: Option<i64>,
    /// Its newest result, interval and timeout.
    pub last_result_at: Option<i64>,
    pub interval_ms: i64,
    pub timeout_ms: i64,
}

/// Why a failing child's problem is not told on its own now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behind {
    /// A parent shows a problem (or maintenance): shown in the child's reason, held for as
    /// long as it lasts (the parent's next change of status marks the child due).
    Parent { name: String, status: MonitorStatus },
    /// A parent has not been checked since the child began failing, or its newest result
    /// fails and is not confirmed yet: wait for it until this instant.
    Waiting { until: i64 },
}

fn is_problem(status: MonitorStatus) -> bool {
    matches!(
        status,
        MonitorStatus::Down | MonitorStatus::Degraded | MonitorStatus::Stale
    )
}

/// Whether the child is behind a parent now.
pub fn behind(child: Child, parents: &[Parent], now: i64) -> Option<Behind> {
    if !is_problem(child.status) {
        return None;
    }
    let shown_problem = |p: &Parent| {
        p.shown
            .filter(|&s| is_problem(s) || s == MonitorStatus::Maintenance)
    };
    if let Some((parent, status)) = parents.iter().find_map(|p| Some((p, shown_problem(p)?))) {
        return Some(Behind::Parent {
            name: parent.name.clone(),
            status,
        });
    }
    parents
        .iter()
        .filter_map(|p| {
            let last = p.last_result_at?;
            // Not checked since the child began failing, or failing itself but not confirmed
            // yet: its next result says whether it is the cause.
            let not_since = child.failing_since.is_some_and(|since| last < since);
            let failing = p.newest == Some(Verdict::Down);
            let parents_next = last + p.interval_ms + p.timeout_ms + SLACK_MS;
            // Up again since the child's newest result: the child's next one says whether it
            // still fails on its own.
            let recovered_after = p
                .up_since
                .zip(child.last_result_at)
                .is_some_and(|(up, child_last)| up > child_last);
            let childs_next = child
                .last_result_at
                .map(|l| l + child.interval_ms + child.timeout_ms + SLACK_MS);
            [
                (not_since || failing).then_some(parents_next),
                recovered_after.then_some(childs_next).flatten(),
            ]
            .into_iter()
            .flatten()
            .filter(|until| *until > now)
            .max()
        })
        .min()
        .map(|until| Behind::Waiting { until })
}

/// When a monitor's newest run of `status` verdicts began: its newest result, less an
/// interval per result of the run before it (its check times are not kept apart).
pub fn run_since(latest: Option<&StatusRow>, verdict: Verdict, interval_ms: i64) -> Option<i64> {
    let row = latest?;
    (row.status.verdict() == Some(verdict))
        .then(|| row.last_result_at - (row.run_length.max(1) - 1) * interval_ms)
}

/// The parents of each monitor in `monitors`, as the rule sees them.
pub fn parents_by_child(
    monitors: &[Monitor],
    rows: &HashMap<String, Monitor>,
    latest: &HashMap<String, StatusRow>,
) -> HashMap<String, Vec<Parent>> {
    monitors
        .iter()
        .map(|child| {
            let parents = child
                .parent_ids
                .iter()
                .filter_map(|id| rows.get(id))
                .map(|row| {
                    let newest = latest.get(&row.id);
                    Parent {
                        name: row.name.clone(),
                        shown: row.shown_status,
                        newest: newest.and_then(|s| s.status.verdict()),
                        last_result_at: newest.map(|s| s.last_result_at),
                        interval_ms: row.interval_ms,
                        timeout_ms: row.timeout_ms,
                        up_since: run_since(newest, Verdict::Up, row.interval_ms),
                    }
                })
                .collect();
            (child.id.clone(), parents)
        })
        .collect()
}

/// A store write refused for links changed meanwhile (`LinkConflict`) is `409`: the caller
/// reads again and retries; anything else is the store's failure.
pub(super) fn link_conflict(error: anyhow::Error) -> ServiceError {
    match error.downcast_ref::<LinkConflict>() {
        Some(conflict) => ServiceError::Conflict(conflict.to_string()),
        None => error.into(),
    }
}

/// Monitors' parents: which monitor a monitor depends on, checked for cycles, and who depends on whom.
#[derive(Clone)]
pub struct Parents {
    store: Arc<Store>,
}

impl App {
    /// The parents service, on this central's parts.
    pub fn parents(&self) -> Parents {
        Parents {
            store: self.store.clone(),
        }
    }
}

impl axum::extract::FromRef<std::sync::Arc<App>> for Parents {
    fn from_ref(app: &std::sync::Arc<App>) -> Self {
        app.parents()
    }
}

impl Parents {
    /// `parent_ids` of monitor `id` (`None` for a new one): every parent exists, none is the
    /// monitor itself, and none depends on it (a cycle would hold both forever). The store
    /// checks the same again in its write (`LinkConflict`), against edits made meanwhile.
    pub(super) async fn check_parents(
        &self,
        id: Option<Uuid>,
        parents: &[Uuid],
    ) -> ServiceResult<()> {
        if parents.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = parents.iter().map(Uuid::to_string).collect();
        let me = id.map(|id| id.to_string());
        if me.as_ref().is_some_and(|me| ids.contains(me)) {
            return Err(ValidationError::combination(
                "parent_ids",
                "a monitor cannot depend on itself",
            )
            .into());
        }
        let known = self.store.monitors_by_ids(&ids).await?;
        if let Some(missing) = ids.iter().find(|id| !known.iter().any(|m| &m.id == *id)) {
            return Err(ValidationError::reference(
                "parent_ids",
                format!("no monitor with id {missing}"),
            )
            .into());
        }
        let Some(me) = me else {
            return Ok(()); // a new monitor has no children yet
        };
        for parent in &known {
            if self.store.depends_on(&parent.id, &me).await? {
                return Err(ValidationError::combination(
                    "parent_ids",
                    format!(
                        "`{}` ({}) depends on this monitor already: that would make a cycle",
                        parent.name, parent.id
                    ),
                )
                .into());
            }
        }
        Ok(())
    }

    /// The names of the monitors `ids` (the parents a monitor's page links to), in the order
    /// given; one deleted since is left out.
    pub async fn monitor_names(&self, ids: &[Uuid]) -> ServiceResult<Vec<(Uuid, String)>> {
        let wanted: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        let rows = self.store.monitors_by_ids(&wanted).await?;
        Ok(ids
            .iter()
            .filter_map(|id| {
                let row = rows.iter().find(|r| r.id == id.to_string())?;
                Some((*id, row.name.clone()))
            })
            .collect())
    }

    /// The monitors that depend on `parent`, as its notice names them (at most `MAX_NAMED`),
    /// and how many there are.
    pub(super) async fn dependents_of(&self, parent: &str) -> ServiceResult<(Vec<Subject>, usize)> {
        let (children, count) = self.store.children_of(parent, MAX_NAMED as u32).await?;
        let named = children
            .into_iter()
            .map(|(id, name)| {
                Ok(Subject {
                    id: stored_id(&id)?,
                    name,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok((named, count.max(0) as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_proto::poller_api::ResultStatus;

    fn parent(shown: &str, newest: &str, last: i64) -> Parent {
        Parent {
            name: "switch".into(),
            shown: Some(MonitorStatus::parse(shown).unwrap()),
            newest: Some(Verdict::parse(newest).unwrap()),
            last_result_at: Some(last),
            interval_ms: 10_000,
            timeout_ms: 0,
            up_since: None,
        }
    }

    /// A child down since `since`, its newest result at `last`, every 10 s.
    fn down(since: i64, last: i64) -> Child {
        Child {
            status: MonitorStatus::Down,
            failing_since: Some(since),
            last_result_at: Some(last),
            interval_ms: 10_000,
            timeout_ms: 0,
        }
    }

    #[test]
    fn a_child_is_behind_a_parent_that_shows_a_problem_or_maintenance() {
        for shown in ["down", "degraded", "stale", "maintenance"] {
            assert_eq!(
                behind(down(0, 0), &[parent(shown, "down", 0)], 1),
                Some(Behind::Parent {
                    name: "switch".into(),
                    status: MonitorStatus::parse(shown).unwrap()
                }),
                "{shown}"
            );
        }
        assert_eq!(
            behind(
                Child {
                    status: MonitorStatus::Up,
                    ..down(0, 0)
                },
                &[parent("down", "down", 0)],
                1
            ),
            None,
            "an up child is nobody's concern"
        );
        assert_eq!(
            behind(
                Child {
                    status: MonitorStatus::Paused,
                    ..down(0, 0)
                },
                &[parent("down", "down", 0)],
                1
            ),
            None
        );
    }

    #[test]
    fn a_child_failing_first_waits_for_its_parents_next_result_and_no_longer() {
        // The parent's last result (at 1,000) is older than the child's failure (at 5,000):
        // wait for its next one, due at 11,000, with the slack.
        let up = parent("up", "up", 1_000);
        let until = 1_000 + 10_000 + SLACK_MS;
        assert_eq!(
            behind(down(5_000, 5_000), std::slice::from_ref(&up), 6_000),
            Some(Behind::Waiting { until })
        );
        assert_eq!(
            behind(down(5_000, 5_000), std::slice::from_ref(&up), until),
            None,
            "the parent never reported: the child is told"
        );
        // Checked up after the child began failing: the child's problem is its own.
        let checked = parent("up", "up", 6_000);
        assert_eq!(behind(down(5_000, 5_000), &[checked], 7_000), None);
        // Failing but not confirmed yet: wait for its confirmation.
        let failing = parent("up", "down", 6_000);
        assert_eq!(
            behind(down(5_000, 5_000), &[failing], 7_000),
            Some(Behind::Waiting {
                until: 6_000 + 10_000 + SLACK_MS
            })
        );
        // A parent that never reported is no reason to wait.
        let pending = Parent {
            shown: Some(MonitorStatus::Pending),
            newest: None,
            last_result_at: None,
            ..up
        };
        assert_eq!(behind(down(5_000, 5_000), &[pending], 6_000), None);
    }

    #[test]
    fn a_child_waits_for_its_own_next_result_after_its_parent_recovers() {
        // The parent is up since 20,000; the child's newest (failing) result is older.
        let recovered = Parent {
            up_since: Some(20_000),
            ..parent("up", "up", 20_000)
        };
        let child = down(0, 15_000);
        let until = 15_000 + 10_000 + SLACK_MS;
        assert_eq!(
            behind(child, std::slice::from_ref(&recovered), 21_000),
            Some(Behind::Waiting { until })
        );
        // Failing again after the recovery: its own problem.
        assert_eq!(
            behind(down(0, 25_000), std::slice::from_ref(&recovered), 26_000),
            None
        );
        // Its next result never came: told (it is stale or down, and says so).
        assert_eq!(behind(child, &[recovered], until), None);
    }

    #[test]
    fn a_failing_run_began_an_interval_per_result_before_the_newest() {
        let row = StatusRow {
            status: ResultStatus::Down,
            confirmed: Some(Verdict::Down),
            run_length: 3,
            poller_id: "p".into(),
            last_result_at: 50_000,
            newest_status: ResultStatus::Down,
            latency_ms: None,
            message: String::new(),
            next_due_at: None,
        };
        assert_eq!(run_since(Some(&row), Verdict::Down, 10_000), Some(30_000));
        let up = StatusRow {
            status: ResultStatus::Up,
            ..row
        };
        assert_eq!(run_since(Some(&up), Verdict::Down, 10_000), None);
        assert_eq!(run_since(Some(&up), Verdict::Up, 10_000), Some(30_000));
    }

    /// The checks hold against the API and, for edits that slip past it (made meanwhile), in
    /// the store's write; a deleted parent leaves its children with a new revision.
    #[tokio::test]
    async fn cycles_are_refused_before_and_inside_the_write_and_a_deleted_parent_is_forgotten() {
        use crate::service::clock::Clock;
        let dir = tempfile::tempdir().unwrap();
        let args = crate::config::ServeArgs::with_sqlite_in(dir.path());
        let (clock, _handle) = Clock::manual(1_000_000);
        let app = App::open_with_clock(&args, clock).await.unwrap();
        let create = |name: &str, parents: Vec<Uuid>| {
            let spec = serde_json::from_value(serde_json::json!({
                "name": name, "kind": "tcp", "target": "127.0.0.1:9", "parent_ids": parents,
            }))
            .unwrap();
            let app = &app;
            async move { app.create_monitor(spec).await.unwrap() }
        };
        let a = create("a", vec![]).await;
        let b = create("b", vec![a.id]).await;
        let c = create("c", vec![b.id]).await;
        let patch = shared_proto::MonitorPatch {
            parent_ids: Some(vec![c.id]),
            ..Default::default()
        };
        let refused = app.update_monitor(a.id, patch, None).await.unwrap_err();
        let text = refused.to_string();
        assert!(text.contains("cycle") && text.contains("`c`"), "{text}");
        // Past the service's check (as an edit made meanwhile would be): the store refuses.
        let mut row = app.store.monitor(&a.id.to_string()).await.unwrap().unwrap();
        row.parent_ids = vec![c.id.to_string()];
        let error = app
            .store
            .update_monitor_spec(&row, row.revision)
            .await
            .unwrap_err();
        assert!(matches!(
            error.downcast_ref::<LinkConflict>(),
            Some(LinkConflict::Cycle)
        ));
        assert!(app
            .get_monitor(a.id)
            .await
            .unwrap()
            .spec
            .parent_ids
            .is_empty());
        // Deleting b frees c, whose spec changed: a new revision.
        let before = app.get_monitor(c.id).await.unwrap().revision;
        app.delete_monitor(b.id).await.unwrap();
        let after = app.get_monitor(c.id).await.unwrap();
        assert!(after.spec.parent_ids.is_empty());
        assert!(after.revision > before, "{} > {before}", after.revision);
    }
}
