//! The rules of dependencies, free of I/O: what central keeps of a result's health document
//! (`report_of`, bounded), and what one document changes in a location's stored dependencies
//! (`diff`): a row is written when its state, error, contact or details change; a change of
//! state is recorded with its time; the error history records an error when a dependency
//! becomes unhealthy or its error changes while it stays so, and the recovery when it becomes
//! healthy again (Depsera's deduplication: an unchanged error is never recorded twice). An
//! unhealthy dependency that gives no error carries the marker `Unhealthy`.
//! Must not: read or write anything.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};
use shared_proto::dependencies::DependencyState;
use shared_proto::CheckKind;

use crate::store::{
    DependencyDiff, DependencyReport, DependencyRow, NewDependencyEvent, ReportedDependency,
};

/// The error kept for an unhealthy dependency that gave none.
pub const UNHEALTHY: &str = "Unhealthy";
/// The most dependencies kept from one document (the agent sends at most 100).
pub const MAX_DEPENDENCIES: usize = 100;
/// The longest name kept, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// The longest error kept, in characters.
pub const MAX_ERROR_CHARS: usize = 500;
/// The largest contact or details kept, as JSON text.
pub const MAX_EXTRA_BYTES: usize = 2_048;
/// The most warnings kept from one document, and the longest one, in characters.
pub const MAX_WARNINGS: usize = 20;
pub const MAX_WARNING_CHARS: usize = 300;

/// The dependencies of a result's `meta` (`meta.dependencies`, and the reading's
/// `meta.dependency_warnings`), when it has a list: a poller is believed no further than
/// central's own bounds, and an item without a usable name is left out.
pub fn report_of(meta: &Value) -> Option<DependencyReport> {
    let list = meta.get("dependencies")?.as_array()?;
    let mut names = HashSet::new();
    let items = list
        .iter()
        .filter_map(reported)
        .filter(|item| names.insert(item.name.clone()))
        .take(MAX_DEPENDENCIES)
        .collect();
    let warnings = meta
        .get("dependency_warnings")
        .and_then(Value::as_array)
        .map(|warnings| {
            warnings
                .iter()
                .filter_map(Value::as_str)
                .take(MAX_WARNINGS)
                .map(|w| w.chars().take(MAX_WARNING_CHARS).collect())
                .collect()
        })
        .unwrap_or_default();
    Some(DependencyReport { items, warnings })
}

fn reported(item: &Value) -> Option<ReportedDependency> {
    let name = item.get("name")?.as_str()?;
    if name.trim().is_empty() || name.chars().any(char::is_control) {
        return None;
    }
    let flag = |key: &str| item.get(key).and_then(Value::as_bool).unwrap_or(false);
    let state = if flag("skipped") {
        DependencyState::Skipped
    } else if flag("healthy") {
        DependencyState::Healthy
    } else {
        DependencyState::Unhealthy
    };
    let extra = |key: &str| {
        item.get(key)
            .filter(|v| !v.is_null())
            .map(Value::to_string)
            .filter(|text| text.len() <= MAX_EXTRA_BYTES)
    };
    Some(ReportedDependency {
        name: name.chars().take(MAX_NAME_CHARS).collect(),
        state,
        latency_ms: item
            .get("latency_ms")
            .and_then(Value::as_f64)
            .filter(|l| l.is_finite() && *l >= 0.0),
        error: item
            .get("error")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
            .map(|e| e.chars().take(MAX_ERROR_CHARS).collect()),
        contact: extra("contact"),
        details: extra("check_details"),
    })
}

/// Whether a monitor of `kind` with these stored `settings` asks for notices of its
/// dependencies' changes (`settings.notify_dependencies`).
pub fn notifies(kind: CheckKind, settings: &Map<String, Value>) -> bool {
    kind == CheckKind::Http
        && settings
            .get("notify_dependencies")
            .and_then(Value::as_bool)
            .unwrap_or(false)
}

/// The notice a change calls for, for a monitor that asks for them
/// (`settings.notify_dependencies`), given whether a `dependency.down` was told and not yet
/// followed by its `dependency.up` (`told`): `dependency.down` when the dependency is
/// unhealthy and that was not told, `dependency.up` when it is healthy and its failure was
/// told. So downs and ups alternate whatever happens between them: a skipped spell says
/// nothing, a repeated or changed error is not told again, and recovering through `skipped`
/// is still told.
pub fn notice_of(told: bool, state: DependencyState) -> Option<&'static str> {
    match (told, state) {
        (false, DependencyState::Unhealthy) => Some("dependency.down"),
        (true, DependencyState::Healthy) => Some("dependency.up"),
        _ => None,
    }
}

/// What the document `report`, checked at `at`, changes in the dependencies of `monitor_id`'s
/// location `region`, stored as `before`; with `notify`, the changes that call for a notice
/// carry it (`notice_of`).
pub fn diff(
    monitor_id: &str,
    region: &str,
    at: i64,
    before: &[DependencyRow],
    report: &DependencyReport,
    notify: bool,
) -> DependencyDiff {
    let stored: HashMap<&str, &DependencyRow> =
        before.iter().map(|row| (row.name.as_str(), row)).collect();
    let mut diff = DependencyDiff::default();
    for item in &report.items {
        let error = match (item.state, &item.error) {
            (DependencyState::Unhealthy, None) => Some(UNHEALTHY.to_string()),
            (_, error) => error.clone(),
        };
        let old = stored.get(item.name.as_str()).copied();
        let kind = match old {
            None => Some("appeared"),
            Some(old) if old.state != item.state => Some("changed"),
            Some(old) if item.state == DependencyState::Unhealthy && old.error != error => {
                Some("error")
            }
            Some(_) => None,
        };
        let told_before = old.is_some_and(|o| o.told);
        let notice = kind
            .filter(|_| notify)
            .and_then(|_| notice_of(told_before, item.state));
        let row = DependencyRow {
            monitor_id: monitor_id.to_string(),
            region: region.to_string(),
            name: item.name.clone(),
            state: item.state,
            error: error.clone(),
            contact: item.contact.clone(),
            details: item.details.clone(),
            changed_at: match (kind, old) {
                (Some("appeared" | "changed"), _) | (_, None) => at,
                (_, Some(old)) => old.changed_at,
            },
            told: match notice {
                Some("dependency.down") => true,
                Some(_) => false,
                None => told_before,
            },
        };
        if let Some(kind) = kind {
            diff.events.push(NewDependencyEvent {
                name: item.name.clone(),
                at,
                kind,
                state: item.state,
                error: (item.state == DependencyState::Unhealthy)
                    .then(|| error.clone())
                    .flatten(),
                previous: old.map(|o| o.state),
                notice,
            });
        }
        if old != Some(&row) {
            diff.upserts.push(row);
        }
    }
    let reported: HashSet<&str> = report.items.iter().map(|i| i.name.as_str()).collect();
    for old in before {
        if !reported.contains(old.name.as_str()) {
            diff.gone.push(old.name.clone());
            diff.events.push(NewDependencyEvent {
                name: old.name.clone(),
                at,
                kind: "gone",
                state: old.state,
                error: None,
                previous: Some(old.state),
                notice: None,
            });
        }
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn item(name: &str, state: &'static str, error: Option<&str>) -> ReportedDependency {
        ReportedDependency {
            name: name.into(),
            state: DependencyState::parse(state).unwrap(),
            latency_ms: None,
            error: error.map(str::to_string),
            contact: None,
            details: None,
        }
    }

    fn report(items: Vec<ReportedDependency>) -> DependencyReport {
        DependencyReport {
            items,
            warnings: Vec::new(),
        }
    }

    /// Applies `diff` to `rows` as the store does.
    fn apply(rows: &mut Vec<DependencyRow>, diff: &DependencyDiff) {
        rows.retain(|r| !diff.gone.contains(&r.name));
        for new in &diff.upserts {
            rows.retain(|r| r.name != new.name);
            rows.push(new.clone());
        }
    }

    #[test]
    fn meta_is_read_within_bounds() {
        let meta = json!({
            "dependencies": [
                {"name": "db", "healthy": true, "latency_ms": 3.5, "contact": {"team": "dba"}},
                {"name": "db", "healthy": false},
                {"name": "", "healthy": true},
                {"name": "mail", "healthy": true, "skipped": true, "latency_ms": -1},
                {"name": "cache", "error": "refused", "check_details": "x".repeat(3000)},
                {"healthy": true},
            ],
            "dependency_warnings": ["item 5: no name at /name; not read", 7],
        });
        let report = report_of(&meta).unwrap();
        let states: Vec<(&str, &str)> = report
            .items
            .iter()
            .map(|i| (i.name.as_str(), i.state.as_str()))
            .collect();
        assert_eq!(
            states,
            [
                ("db", "healthy"),
                ("mail", "skipped"),
                ("cache", "unhealthy")
            ]
        );
        assert_eq!(report.items[0].latency_ms, Some(3.5));
        assert_eq!(
            report.items[0].contact.as_deref(),
            Some("{\"team\":\"dba\"}")
        );
        assert_eq!(report.items[1].latency_ms, None);
        assert_eq!(report.items[2].details, None, "over the bound");
        assert_eq!(report.warnings, ["item 5: no name at /name; not read"]);
        assert_eq!(report_of(&json!({"engine": {}})), None);
    }

    #[test]
    fn the_error_history_is_deduplicated_and_recoveries_are_recorded() {
        let mut rows = Vec::new();
        let mut events = Vec::new();
        for (at, state, error) in [
            (1, "healthy", None),
            (2, "unhealthy", Some("timeout")),
            (3, "unhealthy", Some("timeout")),
            (4, "unhealthy", Some("refused")),
            (5, "unhealthy", None),
            (6, "unhealthy", None),
            (7, "healthy", None),
            (8, "healthy", None),
        ] {
            let diff = diff(
                "m",
                "",
                at,
                &rows,
                &report(vec![item("db", state, error)]),
                true,
            );
            apply(&mut rows, &diff);
            events.extend(diff.events);
        }
        type Seen<'a> = (i64, &'a str, &'a str, Option<&'a str>, Option<&'a str>);
        let seen: Vec<Seen> = events
            .iter()
            .map(|e| (e.at, e.kind, e.state.as_str(), e.error.as_deref(), e.notice))
            .collect();
        assert_eq!(
            seen,
            [
                (1, "appeared", "healthy", None, None),
                (
                    2,
                    "changed",
                    "unhealthy",
                    Some("timeout"),
                    Some("dependency.down")
                ),
                (4, "error", "unhealthy", Some("refused"), None),
                (5, "error", "unhealthy", Some(UNHEALTHY), None),
                (7, "changed", "healthy", None, Some("dependency.up")),
            ]
        );
        assert_eq!(rows[0].changed_at, 7);
    }

    #[test]
    fn a_steady_document_writes_nothing_and_a_missing_name_is_gone() {
        let first = report(vec![
            item("db", "healthy", None),
            item("mail", "skipped", None),
        ]);
        let mut rows = Vec::new();
        let appeared = diff("m", "eu", 1, &rows, &first, false);
        apply(&mut rows, &appeared);
        assert_eq!(
            diff("m", "eu", 2, &rows, &first, false),
            DependencyDiff::default()
        );
        let later = diff(
            "m",
            "eu",
            3,
            &rows,
            &report(vec![item("db", "healthy", None)]),
            false,
        );
        assert_eq!(later.gone, ["mail"]);
        assert_eq!(later.events[0].kind, "gone");
        assert!(later.upserts.is_empty());
    }

    #[test]
    fn downs_and_ups_alternate_whatever_comes_between() {
        let mut rows = Vec::new();
        let mut told = Vec::new();
        for (at, state) in [
            (1, "healthy"),
            (2, "unhealthy"),
            (3, "skipped"),
            (4, "unhealthy"),
            (5, "skipped"),
            (6, "healthy"),
            (7, "skipped"),
            (8, "healthy"),
            (9, "unhealthy"),
        ] {
            let diff = diff(
                "m",
                "",
                at,
                &rows,
                &report(vec![item("db", state, None)]),
                true,
            );
            apply(&mut rows, &diff);
            told.extend(diff.events.iter().filter_map(|e| e.notice.map(|n| (at, n))));
        }
        assert_eq!(
            told,
            [
                (2, "dependency.down"),
                (6, "dependency.up"),
                (9, "dependency.down")
            ]
        );
        // Without `notify`, nothing is marked told.
        let quiet = diff(
            "m",
            "",
            1,
            &[],
            &report(vec![item("db", "unhealthy", None)]),
            false,
        );
        assert!(quiet.events[0].notice.is_none() && !quiet.upserts[0].told);
    }

    fn any_item() -> impl Strategy<Value = ReportedDependency> {
        (
            prop::sample::select(vec!["a", "b", "c"]),
            prop::sample::select(vec!["healthy", "unhealthy", "skipped"]),
            prop::option::of(prop::sample::select(vec!["e1", "e2"])),
        )
            .prop_map(|(name, state, error)| item(name, state, error))
    }

    proptest! {
        /// Against a simple model: after any sequence of documents the rows say what the
        /// newest document said, each row's `changed_at` is the time its state last moved,
        /// and error events are exactly the unhealthy documents whose error differs from the
        /// previous document's (or that follow one in another state).
        #[test]
        fn rows_and_events_follow_the_documents(
            documents in prop::collection::vec(prop::collection::vec(any_item(), 0..4), 1..12)
        ) {
            let mut rows: Vec<DependencyRow> = Vec::new();
            // The model: per name, (state, error, changed_at) as last reported.
            let mut model: HashMap<String, (String, Option<String>, i64)> = HashMap::new();
            for (at, items) in documents.into_iter().enumerate() {
                let at = at as i64;
                let mut seen = HashSet::new();
                let items: Vec<_> = items.into_iter().filter(|i| seen.insert(i.name.clone())).collect();
                let d = diff("m", "", at, &rows, &report(items.clone()), false);
                let mut expected_errors = 0;
                let mut next: HashMap<String, (String, Option<String>, i64)> = HashMap::new();
                for item in &items {
                    let error = if item.state.as_str() == "unhealthy" {
                        Some(item.error.clone().unwrap_or_else(|| UNHEALTHY.into()))
                    } else {
                        item.error.clone()
                    };
                    let changed_at = match model.get(&item.name) {
                        Some((state, old_error, changed)) if state == item.state.as_str() => {
                            if item.state.as_str() == "unhealthy" && *old_error != error {
                                expected_errors += 1;
                            }
                            *changed
                        }
                        _ => at,
                    };
                    next.insert(item.name.clone(), (item.state.as_str().to_string(), error, changed_at));
                }
                let gone = model.keys().filter(|n| !next.contains_key(*n)).count();
                prop_assert_eq!(d.gone.len(), gone);
                prop_assert_eq!(d.events.iter().filter(|e| e.kind == "error").count(), expected_errors);
                apply(&mut rows, &d);
                model = next;
                let mut stored: Vec<(String, String, Option<String>, i64)> = rows
                    .iter()
                    .map(|r| (r.name.clone(), r.state.as_str().to_string(), r.error.clone(), r.changed_at))
                    .collect();
                stored.sort();
                let mut wanted: Vec<(String, String, Option<String>, i64)> = model
                    .iter()
                    .map(|(n, (s, e, c))| (n.clone(), s.clone(), e.clone(), *c))
                    .collect();
                wanted.sort();
                prop_assert_eq!(stored, wanted);
            }
        }
    }
}
