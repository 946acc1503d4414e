//! The audit log: who changed what, when and from where, with the object as the settings API
//! shows it before and after the change. Views never carry secrets (they are write-only
//! everywhere), so neither does the log. Entries are written at the boundary (`api::audit`'s
//! layers, for the settings API and for the page's forms), one per change that succeeded,
//! read here, and pruned after `CENTRAL_AUDIT_RETENTION`; the store refuses to alter one.
//!
//! What an entry is about comes from the route as matched (`/monitors/{id}/pause`), never from
//! a value in the request: `Subject::of`. The "before" is read just before the change runs and
//! the "after" is the change's own answer, so an edit made at the same instant by someone else
//! can show in one of them; the entry's actor and action are exact.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use uuid::Uuid;

use shared_proto::audit::{AuditEntry, AuditFilter};
use shared_proto::settings_api::Page;

use super::access::{Actor, Principal};
use super::buckets::Buckets;
use super::tokens::page;
use super::{time_of, App};
use crate::service::error::ServiceResult;
use crate::store::{AuditRow, Cursor};

/// What a change was about: the kind of object (as the settings API names its collection),
/// its id when the route names one, and the action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub kind: &'static str,
    pub id: Option<String>,
    pub action: String,
}

/// The page's collections, by the name the settings API gives them.
const PAGE_KINDS: [(&str, &str); 9] = [
    ("/notifications/channels", "notification-channels"),
    ("/dependencies/aliases", "dependency-aliases"),
    ("/maintenance", "maintenance-windows"),
    ("/status-pages", "status-pages"),
    ("/tokens", "registration-tokens"),
    ("/monitors", "monitors"),
    ("/pollers", "pollers"),
    ("/users", "users"),
    ("/api-keys", "api-keys"),
];

/// The settings API's collections that changes are made to.
pub(super) const API_KINDS: [&str; 11] = [
    "managed-objects",
    "registration-tokens",
    "pollers",
    "monitors",
    "notification-channels",
    "dependency-aliases",
    "maintenance-windows",
    "status-pages",
    "users",
    "api-keys",
    "commands",
];

impl Subject {
    /// The subject of a change made on the settings API (`path` below `/api/v1`, as matched),
    /// or `None` for a route that changes nothing (a read).
    pub fn of_api(method: &str, matched: &str, actual: &str) -> Option<Subject> {
        if method == "GET" || method == "HEAD" {
            return None;
        }
        // A test run of an unsaved monitor concerns no stored object, but is recorded.
        if matched == "/monitors/test" {
            return Some(Subject {
                kind: "monitors",
                id: None,
                action: "test".into(),
            });
        }
        let rest = matched.trim_start_matches('/');
        let kind_name = rest.split('/').next()?;
        let kind = API_KINDS.into_iter().find(|k| *k == kind_name)?;
        Some(Self::within(
            kind,
            method,
            &rest[kind_name.len()..],
            actual,
            1,
        ))
    }

    /// The subject of a form posted on the page (`path` as matched), or `None` for one that
    /// is not a change (logging out).
    pub fn of_page(method: &str, matched: &str, actual: &str) -> Option<Subject> {
        if method != "POST" {
            return None;
        }
        let (prefix, kind) = PAGE_KINDS
            .into_iter()
            .find(|(prefix, _)| matched.starts_with(prefix))?;
        let depth = prefix.matches('/').count();
        Some(Self::within(
            kind,
            method,
            &matched[prefix.len()..],
            actual,
            depth,
        ))
    }

    /// `tail` is the matched route after the collection (`/{id}/pause`, `/{id}`, ``, `/pause`);
    /// the id is the actual path's segment at `depth` when the route has one there.
    fn within(kind: &'static str, method: &str, tail: &str, actual: &str, depth: usize) -> Subject {
        let segments: Vec<&str> = tail.split('/').filter(|s| !s.is_empty()).collect();
        let has_id = segments.first().is_some_and(|s| s.starts_with('{'));
        // An id as the object names itself (a UUID however it was typed in the path), so
        // that filtering by the object's id finds every entry about it.
        // A route naming its object by several parameters (`/managed-objects/{kind}/{key}`)
        // records them together, `kind/key`.
        let params = segments.iter().take_while(|s| s.starts_with('{')).count();
        let id = has_id
            .then(|| {
                let named: Vec<&str> = actual
                    .trim_start_matches('/')
                    .split('/')
                    .skip(depth)
                    .take(params)
                    .collect();
                (named.len() == params).then(|| named.join("/"))
            })
            .flatten()
            .map(|id| Uuid::try_parse(&id).map_or(id, |u| u.to_string()));
        let verb = segments.iter().rev().find(|s| !s.starts_with('{'));
        let action = match (verb, method) {
            // `DELETE /users/{id}/sessions`: the things named go.
            (Some(verb), "DELETE") => format!("delete_{}", verb.replace('-', "_")),
            (Some(verb), _) => verb.replace('-', "_"),
            (None, "POST") if has_id => "update".into(),
            (None, "POST") => "create".into(),
            (None, "PATCH" | "PUT") => "update".into(),
            (None, "DELETE") => "delete".into(),
            (None, other) => other.to_lowercase(),
        };
        Subject { kind, id, action }
    }
}

/// A form's (or handler's) word to the audit layer, carried as an extension of its answer: the
/// layer sees only statuses, and some answer `200` for a run that changed nothing stored (the
/// monitor form's "Test", `POST /api/v1/monitors/test`) or make an object whose id is in no
/// route (a creation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormOutcome {
    /// The form made the object with this id.
    Made(String),
    /// A test run of a monitor spec (as views show it, secrets hidden), which changes nothing
    /// stored but acts on the world from a poller: recorded as `test`, with the spec tested as
    /// the entry's "after" (the answer holds only the result).
    Tested(Value),
}

/// Fields that carry a credential in an answer shown once (a new API key's or registration
/// token's `token`, a heartbeat monitor's `ping_url`) or in a request-like view.
const SECRET_FIELDS: [&str; 6] = [
    "token",
    "secret",
    "password",
    "ping_url",
    "access_token",
    "refresh_token",
];

/// `value` with every secret-bearing field (`SECRET_FIELDS`, at any depth) replaced by
/// `REDACTED`: an answer that shows a secret once must not show it again in the log. The values
/// of `headers` objects go too: an `http` monitor's headers are where its credentials to the
/// target live (protocol.md says to put them there), and a channel's are shown redacted already.
pub fn redacted(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(fields) => {
                for (name, field) in fields.iter_mut() {
                    if SECRET_FIELDS.contains(&name.as_str()) && !field.is_null() {
                        *field = Value::String(shared_proto::notifications::HIDDEN.into());
                    } else if let (true, Value::Object(headers)) = (name == "headers", &mut *field)
                    {
                        for value in headers.values_mut() {
                            *value = Value::String(shared_proto::notifications::HIDDEN.into());
                        }
                    } else {
                        walk(field);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

/// Failed sign-ins recorded per minute at most, in all: each is an entry, and a flood from
/// many addresses (each allowed a failure a minute, `api::auth_failures`) must not grow the
/// log without bound. Past it they are counted, logged once a minute, and the next entry
/// written says how many were not (`after.not_recorded_before`).
const FAILED_SIGN_INS_PER_MINUTE: f64 = 60.0;

/// The audit log's limits: `CENTRAL_AUDIT_RETENTION`, and the failed sign-ins it records.
pub struct AuditLimits {
    /// In ms.
    retention_ms: i64,
    failed_sign_ins: Buckets<()>,
    /// Failed sign-ins not recorded since the last that was.
    not_recorded: AtomicU64,
    /// One warning a minute while they are not.
    warnings: Buckets<()>,
}

impl AuditLimits {
    pub fn new(retention_ms: i64) -> Self {
        Self {
            retention_ms,
            failed_sign_ins: Buckets::new(
                FAILED_SIGN_INS_PER_MINUTE / 60.0,
                FAILED_SIGN_INS_PER_MINUTE,
            ),
            not_recorded: AtomicU64::new(0),
            warnings: Buckets::new(1.0 / 60.0, 1.0),
        }
    }
}

/// A sign-in event for `record_session_event`.
pub enum SessionEvent<'a> {
    LogIn(&'a Principal),
    LogOut(&'a Principal),
    /// A refused sign-in: what was tried (an email, `admin token`, `single sign-on`).
    Failed {
        tried: &'a str,
    },
}

/// How an entry names who acted: kind, id, the user a key acted for, name.
pub(super) type EntryActor = (&'static str, Option<String>, Option<String>, String);

pub(super) fn actor_of(principal: &Principal) -> EntryActor {
    match &principal.actor {
        Actor::AdminToken => ("admin_token", None, None, "admin token".into()),
        Actor::User { id, name } => ("user", Some(id.to_string()), None, name.clone()),
        Actor::ApiKey { id, name, maker } => (
            "api_key",
            Some(id.to_string()),
            maker.map(|m| m.to_string()),
            name.clone(),
        ),
    }
}

impl App {
    /// The object as the settings API shows it now, for an entry's "before"; `None` when
    /// there is none (yet), or the kind has no single view.
    pub async fn audit_view(&self, subject: &Subject) -> Option<Value> {
        let id: Uuid = subject.id.as_deref()?.parse().ok()?;
        let view = match subject.kind {
            "monitors" => serde_json::to_value(self.get_monitor(id).await.ok()?),
            "notification-channels" => {
                serde_json::to_value(self.channels().get_channel(id).await.ok()?)
            }
            "maintenance-windows" => {
                serde_json::to_value(self.maintenance().get_window(id).await.ok()?)
            }
            "pollers" => serde_json::to_value(self.get_poller(id).await.ok()?),
            "status-pages" => serde_json::to_value(self.status_pages().get_page(id).await.ok()?),
            "users" => serde_json::to_value(self.users().get_user(id).await.ok()?),
            _ => return None,
        };
        view.ok()
    }

    /// Appends an entry. A failure is logged and the change stands: the change happened, and
    /// refusing to answer it would not undo it.
    pub async fn record_change(
        &self,
        principal: &Principal,
        address: Option<String>,
        subject: Subject,
        before: Option<Value>,
        after: Option<Value>,
    ) {
        // A creation's route names no id; its answer does.
        let object_id = subject.id.or_else(|| {
            let id = after.as_ref()?.get("id")?.as_str()?;
            Some(id.to_string())
        });
        self.append(
            actor_of(principal),
            address,
            subject.action,
            subject.kind,
            object_id,
            before.map(|v| redacted(v).to_string()),
            after.map(|v| redacted(v).to_string()),
        )
        .await;
    }

    /// Records a sign-in, a failed one or a sign-out on the page, as the object `sessions`:
    /// `login` and `logout` name who (the user, or the admin token), `login_failed` names
    /// no one (`anonymous`) but what was tried (the email, at most 254 characters, never a
    /// password or token); `after` says how (`password`, `admin_token`, `sso`).
    pub async fn record_session_event(
        &self,
        event: SessionEvent<'_>,
        method: &str,
        address: Option<String>,
    ) {
        let mut after = serde_json::json!({ "method": method });
        let (action, actor) = match event {
            SessionEvent::LogIn(principal) => ("login", actor_of(principal)),
            SessionEvent::LogOut(principal) => ("logout", actor_of(principal)),
            SessionEvent::Failed { tried } => {
                let limits = &self.limits.audit;
                let now = std::time::Instant::now();
                if limits.failed_sign_ins.take((), now).is_err() {
                    limits.not_recorded.fetch_add(1, Ordering::Relaxed);
                    if limits.warnings.take((), now).is_ok() {
                        tracing::warn!(
                            "failed sign-ins come faster than {FAILED_SIGN_INS_PER_MINUTE} a \
                             minute: past that they are counted, not each recorded in the audit log"
                        );
                    }
                    return;
                }
                let skipped = limits.not_recorded.swap(0, Ordering::Relaxed);
                if skipped > 0 {
                    after["not_recorded_before"] = skipped.into();
                }
                (
                    "login_failed",
                    (
                        "anonymous",
                        None,
                        None,
                        tried.chars().take(254).collect::<String>(),
                    ),
                )
            }
        };
        self.append(
            actor,
            address,
            action.into(),
            "sessions",
            None,
            None,
            Some(after.to_string()),
        )
        .await;
    }

    /// Appends one entry, now. A failure is logged and the change stands (see `record_change`).
    #[allow(clippy::too_many_arguments)]
    async fn append(
        &self,
        actor: EntryActor,
        address: Option<String>,
        action: String,
        object_kind: &str,
        object_id: Option<String>,
        before: Option<String>,
        after: Option<String>,
    ) {
        let mut row = new_row(
            self.now_ms(),
            actor,
            address,
            action,
            object_kind,
            object_id,
            before,
        );
        row.after = after;
        if let Err(e) = self.store.insert_audit(&row).await {
            tracing::error!(action = %row.action, object = %row.object_kind, "the audit log could not be written: {e:#}");
        }
    }

    /// A page of the log, newest first.
    pub async fn audit_log(
        &self,
        filter: &AuditFilter,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<AuditEntry>> {
        let rows = self.store.audit_entries(filter, after, limit).await?;
        Ok(page(
            rows,
            limit,
            |row| Cursor {
                key: row.at,
                id: row.id.clone(),
            },
            |row| Ok(entry_of(row)),
        )?)
    }

    /// Drops entries older than the retention; returns how many went.
    pub async fn prune_audit(&self) -> anyhow::Result<u64> {
        let before = self.now_ms().saturating_sub(self.limits.audit.retention_ms);
        self.store.prune_audit(before).await
    }
}

fn entry_of(row: &AuditRow) -> AuditEntry {
    let json = |text: &Option<String>| text.as_deref().and_then(|t| serde_json::from_str(t).ok());
    AuditEntry {
        id: row.id.parse().unwrap_or_default(),
        at: time_of(row.at),
        actor: shared_proto::audit::AuditActor {
            kind: row.actor_kind.clone(),
            id: row.actor_id.clone(),
            user_id: row.actor_user_id.clone(),
            name: row.actor_name.clone(),
            address: row.address.clone(),
        },
        action: row.action.clone(),
        object: shared_proto::audit::AuditObject {
            kind: row.object_kind.clone(),
            id: row.object_id.clone(),
        },
        before: json(&row.before),
        after: json(&row.after),
    }
}

/// An entry made at `at`, with a fresh id, without its "after".
pub(super) fn new_row(
    at: i64,
    (actor_kind, actor_id, actor_user_id, actor_name): EntryActor,
    address: Option<String>,
    action: String,
    object_kind: &str,
    object_id: Option<String>,
    before: Option<String>,
) -> AuditRow {
    AuditRow {
        id: Uuid::now_v7().to_string(),
        at,
        actor_kind: actor_kind.into(),
        actor_id,
        actor_user_id,
        actor_name,
        address,
        action,
        object_kind: object_kind.into(),
        object_id,
        before,
        after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "7f1c1d3e-0000-4000-8000-000000000000";

    fn subject(kind: &'static str, id: Option<&str>, action: &str) -> Option<Subject> {
        Some(Subject {
            kind,
            id: id.map(str::to_string),
            action: action.into(),
        })
    }

    #[test]
    fn api_changes_are_named_by_their_route() {
        let at = |method, matched: &str| {
            let actual = matched.replace("{id}", ID);
            Subject::of_api(method, matched, &actual)
        };
        assert_eq!(at("POST", "/monitors"), subject("monitors", None, "create"));
        assert_eq!(
            at("PATCH", "/monitors/{id}"),
            subject("monitors", Some(ID), "update")
        );
        assert_eq!(
            at("DELETE", "/users/{id}"),
            subject("users", Some(ID), "delete")
        );
        assert_eq!(
            at("POST", "/monitors/test"),
            subject("monitors", None, "test"),
            "a test run changes nothing stored, but acts from a poller"
        );
        assert_eq!(
            Subject::of_api(
                "PUT",
                "/managed-objects/{kind}/{key}",
                "/managed-objects/monitors/api"
            ),
            subject("managed-objects", Some("monitors/api"), "update")
        );
        assert_eq!(
            at("POST", "/monitors/{id}/ping-url"),
            subject("monitors", Some(ID), "ping_url")
        );
        assert_eq!(
            at("POST", "/monitors/pause"),
            subject("monitors", None, "pause")
        );
        assert_eq!(
            at("POST", "/registration-tokens/{id}/rotate"),
            subject("registration-tokens", Some(ID), "rotate")
        );
        assert_eq!(at("GET", "/monitors/{id}"), None, "a read is no change");
    }

    #[test]
    fn secrets_shown_once_are_not_recorded() {
        let answer = serde_json::json!({"id": "k", "name": "ci", "token": "pkey_1_s3cret",
            "nested": [{"ping_url": "https://c/ping/abc"}], "secret": null,
            "settings": {"headers": {"Authorization": "Bearer t0ken"}, "method": "GET"}});
        let kept = redacted(answer);
        assert_eq!(kept["token"], "REDACTED");
        assert_eq!(kept["nested"][0]["ping_url"], "REDACTED");
        assert_eq!(kept["name"], "ci");
        assert!(kept["secret"].is_null(), "nothing to hide stays null");
        assert_eq!(kept["settings"]["headers"]["Authorization"], "REDACTED");
        assert_eq!(kept["settings"]["method"], "GET");
    }

    #[test]
    fn page_forms_are_named_as_the_api_names_them() {
        let at = |matched: &str| Subject::of_page("POST", matched, &matched.replace("{id}", ID));
        assert_eq!(at("/monitors"), subject("monitors", None, "create"));
        assert_eq!(
            at("/monitors/{id}"),
            subject("monitors", Some(ID), "update")
        );
        assert_eq!(
            at("/monitors/{id}/delete"),
            subject("monitors", Some(ID), "delete")
        );
        assert_eq!(
            at("/notifications/channels/{id}"),
            subject("notification-channels", Some(ID), "update")
        );
        assert_eq!(
            at("/tokens/{id}/revoke"),
            subject("registration-tokens", Some(ID), "revoke")
        );
        assert_eq!(
            at("/maintenance/{id}/delete"),
            subject("maintenance-windows", Some(ID), "delete")
        );
        assert_eq!(
            at("/users/{id}/log-out"),
            subject("users", Some(ID), "log_out")
        );
        assert_eq!(
            at("/api-keys/{id}/revoke"),
            subject("api-keys", Some(ID), "revoke")
        );
        assert_eq!(at("/logout"), None);
        assert_eq!(Subject::of_page("GET", "/monitors", "/monitors"), None);
    }

    #[test]
    fn an_id_is_recorded_as_the_object_names_itself() {
        let typed = format!("/monitors/{}/pause", ID.to_uppercase());
        assert_eq!(
            Subject::of_page("POST", "/monitors/{id}/pause", &typed),
            subject("monitors", Some(ID), "pause")
        );
    }
}
