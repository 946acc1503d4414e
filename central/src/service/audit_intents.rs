//! No change without its audit entry: the boundary (`api::audit`) writes a change's entry
//! ahead, as an intent, before the change runs; a change whose intent cannot be written is not
//! made (`503 audit_unavailable`). Once the change succeeded its entry moves to the log in one
//! transaction with the intent's removal; a change that was refused forgets its intent.
//!
//! An intent left behind (central stopped between the change and its entry, or the log failed
//! just then) is finished by upkeep once it is `STALE_AFTER` old, long past any request in
//! flight on any replica: it is written to the log with its action marked `_unconfirmed`
//! (`update_unconfirmed`: tried, and central could not tell whether it was made) and the
//! object as it is when upkeep looks as "after". Telling from the object whether the change
//! was made would guess: views carry status and placement, which change by themselves. The
//! audit log itself stays append-only: an intent is never an entry until it is finished.
//!
//! Owns the intent's life; what an entry says (actor, redaction) is `service::audit`'s. Cost:
//! two writes per change; upkeep reads only intents left behind (normally none).

use std::time::Duration;

use serde_json::Value;

use super::access::Principal;
use super::audit::{actor_of, redacted, Subject};
use std::sync::Arc;

use super::audit::new_row;
use super::clock::Clock;
use super::App;
use crate::store::{AuditRow, Store};

/// How old an intent must be before upkeep finishes it: far longer than a change takes.
pub const STALE_AFTER: Duration = Duration::from_secs(10 * 60);

/// Intents upkeep finishes per round.
const PER_ROUND: u32 = 1_000;

/// A change's entry written ahead; finish it with `complete_change` or `abandon_change`.
#[derive(Debug)]
pub struct Intent {
    row: AuditRow,
}

/// The intents' service: a change's entry written ahead, then finished or forgotten.
#[derive(Clone)]
pub struct AuditIntents {
    store: Arc<Store>,
    clock: Clock,
}

impl App {
    /// The audit intents' service, on this central's store and clock.
    pub fn audit_intents(&self) -> AuditIntents {
        AuditIntents {
            store: self.store.clone(),
            clock: self.clock.clone(),
        }
    }
}

impl AuditIntents {
    /// Writes the entry of a change about to be made by `principal`; the change may run only
    /// when this succeeds.
    pub async fn intend_change(
        &self,
        principal: &Principal,
        address: Option<String>,
        subject: &Subject,
        before: Option<Value>,
    ) -> anyhow::Result<Intent> {
        let row = new_row(
            self.clock.now_ms(),
            actor_of(principal),
            address,
            subject.action.clone(),
            subject.kind,
            subject.id.clone(),
            before.map(|v| redacted(v).to_string()),
        );
        self.store.insert_audit_intent(&row).await?;
        Ok(Intent { row })
    }

    /// The change succeeded: its entry goes to the log, with what the change turned out to be
    /// (`subject`: a creation learns its id, a form its action) and the object after. A
    /// failure is logged; the intent stays for upkeep to finish.
    pub async fn complete_change(&self, intent: Intent, subject: Subject, after: Option<Value>) {
        let mut row = intent.row;
        // A creation's route names no id; its answer does.
        row.object_id = subject.id.or_else(|| {
            let id = after.as_ref()?.get("id")?.as_str()?;
            Some(id.to_string())
        });
        row.action = subject.action;
        row.after = after.map(|v| redacted(v).to_string());
        if let Err(e) = self.store.complete_audit_intent(&row).await {
            tracing::error!(
                action = %row.action,
                object = %row.object_kind,
                "a change's audit entry could not be written; upkeep writes it from its intent \
                 within the hour: {e:#}"
            );
        }
    }

    /// The change was refused: nothing to record.
    pub async fn abandon_change(&self, intent: Intent) {
        if let Err(e) = self.store.delete_audit_intent(&intent.row.id).await {
            tracing::warn!("a refused change's audit intent could not be forgotten; upkeep judges it later: {e:#}");
        }
    }
}

impl App {
    /// Writes the intents left behind (older than `STALE_AFTER`) to the log as unconfirmed,
    /// a round at a time; says how many.
    pub async fn finish_stale_intents(&self) -> anyhow::Result<usize> {
        let before = self.now_ms() - STALE_AFTER.as_millis() as i64;
        let stale = self.store.audit_intents_before(before, PER_ROUND).await?;
        for mut row in stale.iter().cloned() {
            let subject = Subject {
                kind: kind_named(&row.object_kind),
                id: row.object_id.clone(),
                action: row.action.clone(),
            };
            row.after = self
                .audit_view(&subject)
                .await
                .map(|v| redacted(v).to_string());
            row.action = unconfirmed(&row.action);
            self.store.complete_audit_intent(&row).await?;
        }
        Ok(stale.len())
    }
}

/// The action of a change central could not tell was made.
pub fn unconfirmed(action: &str) -> String {
    format!("{action}_unconfirmed")
}

/// The kind as `Subject` names it (a `&'static str`), from a stored intent; an unknown one
/// (none is written) has no view.
fn kind_named(stored: &str) -> &'static str {
    super::audit::API_KINDS
        .into_iter()
        .find(|kind| *kind == stored)
        .unwrap_or("")
}
