//! Incidents on status pages, on the wire: what operators write
//! (`/api/v1/status-pages/{id}/incidents`: a title, a status, a message in Markdown, the
//! monitors it affects, and updates), and what visitors read of them and of maintenance in
//! `summary.json`, the page and its feed. Checks here are the ones that need no database;
//! central checks that the monitors named are ones the page shows.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::monitor::rules::{has_control, is_blank};
use crate::ValidationError;

/// The most characters of an incident's message or update (Markdown).
pub const MAX_MESSAGE: usize = 10_000;
/// The most monitors one incident names.
pub const MAX_INCIDENT_MONITORS: usize = 200;
/// The most updates one incident has (its first message included): a timeline people read.
pub const MAX_UPDATES: usize = 200;
/// How long a resolved incident stays on its page (then it is in the page's history).
pub const RESOLVED_SHOWN_DAYS: i64 = 7;
/// How far ahead a page shows planned maintenance.
pub const MAINTENANCE_AHEAD_DAYS: i64 = 7;

/// Where an incident stands, in the words status pages use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum IncidentStatus {
    /// Something is wrong and the cause is not known yet.
    #[default]
    Investigating,
    /// The cause is known; a fix is under way.
    Identified,
    /// A fix is in; the operators are watching that it holds.
    Monitoring,
    /// Over.
    Resolved,
}

impl IncidentStatus {
    pub const ALL: [IncidentStatus; 4] = [
        IncidentStatus::Investigating,
        IncidentStatus::Identified,
        IncidentStatus::Monitoring,
        IncidentStatus::Resolved,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IncidentStatus::Investigating => "investigating",
            IncidentStatus::Identified => "identified",
            IncidentStatus::Monitoring => "monitoring",
            IncidentStatus::Resolved => "resolved",
        }
    }

    pub fn parse(text: &str) -> Option<IncidentStatus> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// How visitors read it.
    pub fn words(self) -> &'static str {
        match self {
            IncidentStatus::Investigating => "Investigating",
            IncidentStatus::Identified => "Identified",
            IncidentStatus::Monitoring => "Monitoring",
            IncidentStatus::Resolved => "Resolved",
        }
    }
}

/// `POST /api/v1/status-pages/{id}/incidents`: an incident, its message its first update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IncidentSpec {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub title: String,
    #[serde(default)]
    pub status: IncidentStatus,
    /// Markdown (raw HTML is shown as text, images as their description, links only to
    /// `http`, `https` and `mailto`).
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 10000,
            pattern = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*$"
        )
    )]
    pub message: String,
    /// The monitors it affects: ones the page shows, named on the page by their display names.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 200))]
    pub monitor_ids: Vec<Uuid>,
}

/// `PATCH …/incidents/{iid}`: a new title or monitors change the incident; a `message` (with a
/// new `status`, or the same) adds an update to its timeline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IncidentPatch {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub title: Option<String>,
    /// Only with a `message` saying why.
    pub status: Option<IncidentStatus>,
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 10000,
            pattern = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*$"
        )
    )]
    pub message: Option<String>,
    #[cfg_attr(feature = "openapi", schema(max_items = 200))]
    pub monitor_ids: Option<Vec<Uuid>>,
    /// Whether visitors see it: `true` publishes a draft a page opened itself.
    pub published: Option<bool>,
}

/// `POST …/incidents/{iid}/updates`: what is new, and where the incident stands now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IncidentUpdateSpec {
    pub status: IncidentStatus,
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 10000,
            pattern = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*$"
        )
    )]
    pub message: String,
}

/// One update of an incident's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IncidentUpdateView {
    pub id: Uuid,
    pub status: IncidentStatus,
    /// Markdown, as written.
    pub message: String,
    pub created_at: DateTime<Utc>,
}

/// An incident as stored, for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IncidentView {
    pub id: Uuid,
    pub page_id: Uuid,
    pub title: String,
    /// The newest update's status.
    pub status: IncidentStatus,
    pub monitor_ids: Vec<Uuid>,
    /// Newest first; the last is the message it was opened with.
    pub updates: Vec<IncidentUpdateView>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When it was resolved (its newest update's time, while that says `resolved`).
    pub resolved_at: Option<DateTime<Utc>>,
    /// Whether visitors see it (a draft the page opened itself is not, until published).
    pub published: bool,
    /// The monitor whose going down opened it, when the page opened it itself (its recovery
    /// resolves it).
    pub opened_for: Option<Uuid>,
}

/// An incident as visitors read it: affected monitors by the names the page gives them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ShownIncident {
    pub id: Uuid,
    pub title: String,
    pub status: IncidentStatus,
    /// The affected monitors the page shows, by their names there.
    pub affected: Vec<String>,
    /// Newest first.
    pub updates: Vec<ShownUpdate>,
    pub started_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ShownUpdate {
    pub id: Uuid,
    pub status: IncidentStatus,
    /// Markdown, as the operator wrote it (the HTML page renders it safely).
    pub message: String,
    pub at: DateTime<Utc>,
}

/// Maintenance over monitors a page shows: under way now, or starting within
/// `MAINTENANCE_AHEAD_DAYS`. A window's own name stays with operators (it often names
/// internal hosts); visitors see when, and which of the page's monitors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ShownMaintenance {
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub under_way: bool,
    /// The page's monitors it covers, by their names there.
    pub affected: Vec<String>,
}

fn validate_title(title: &str) -> Result<(), ValidationError> {
    if is_blank(title) {
        return Err(ValidationError::new("title", "must not be empty"));
    }
    if has_control(title) {
        return Err(ValidationError::new(
            "title",
            "must not contain control characters (line breaks, tabs)",
        ));
    }
    if title.chars().count() > 200 {
        return Err(ValidationError::new(
            "title",
            "must be at most 200 characters",
        ));
    }
    Ok(())
}

/// Markdown text: not blank, at most `MAX_MESSAGE` characters, no control characters but
/// line breaks and tabs.
pub fn validate_message(message: &str) -> Result<(), ValidationError> {
    if is_blank(message) {
        return Err(ValidationError::new("message", "must not be empty"));
    }
    if message
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(ValidationError::new(
            "message",
            "must not contain control characters other than line breaks and tabs",
        ));
    }
    if message.chars().count() > MAX_MESSAGE {
        return Err(ValidationError::new(
            "message",
            format!("must be at most {MAX_MESSAGE} characters"),
        ));
    }
    Ok(())
}

fn validate_monitor_ids(ids: &[Uuid]) -> Result<(), ValidationError> {
    if ids.len() > MAX_INCIDENT_MONITORS {
        return Err(ValidationError::new(
            "monitor_ids",
            format!("an incident names at most {MAX_INCIDENT_MONITORS} monitors"),
        ));
    }
    Ok(())
}

impl IncidentSpec {
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_title(&self.title)?;
        validate_message(&self.message)?;
        validate_monitor_ids(&self.monitor_ids)
    }
}

impl IncidentUpdateSpec {
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_message(&self.message)
    }
}

impl IncidentPatch {
    /// Each field's own rules (`400`), then a status needs a message (`422`).
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(title) = &self.title {
            validate_title(title)?;
        }
        if let Some(message) = &self.message {
            validate_message(message)?;
        }
        if let Some(ids) = &self.monitor_ids {
            validate_monitor_ids(ids)?;
        }
        if self.status.is_some() && self.message.is_none() {
            return Err(ValidationError::combination(
                "message",
                "a new `status` is told with a `message` saying what changed",
            ));
        }
        Ok(())
    }

    /// The update it adds to the timeline, if any: its message, with its status or the
    /// incident's `current` one.
    pub fn update(&self, current: IncidentStatus) -> Option<IncidentUpdateSpec> {
        self.message.as_ref().map(|message| IncidentUpdateSpec {
            status: self.status.unwrap_or(current),
            message: message.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_back() {
        for status in IncidentStatus::ALL {
            assert_eq!(IncidentStatus::parse(status.as_str()), Some(status));
            let json = serde_json::to_value(status).unwrap();
            assert_eq!(json, status.as_str());
        }
        assert_eq!(IncidentStatus::parse("fixed"), None);
    }

    #[test]
    fn messages_keep_line_breaks_but_no_other_control() {
        assert!(validate_message("**Down**\n\n- api\r\n\t- db").is_ok());
        assert_eq!(validate_message(" \n ").unwrap_err().field, "message");
        assert_eq!(validate_message("a\u{7}b").unwrap_err().field, "message");
        let long = "x".repeat(MAX_MESSAGE + 1);
        assert_eq!(validate_message(&long).unwrap_err().field, "message");
    }

    #[test]
    fn a_new_status_says_why() {
        let patch = IncidentPatch {
            status: Some(IncidentStatus::Resolved),
            ..IncidentPatch::default()
        };
        let error = patch.validate().unwrap_err();
        assert_eq!(error.field, "message");
        assert_eq!(error.rule, crate::Rule::Combination);
        let patch = IncidentPatch {
            message: Some("Still looking".into()),
            ..IncidentPatch::default()
        };
        patch.validate().unwrap();
        assert_eq!(
            patch.update(IncidentStatus::Identified).unwrap().status,
            IncidentStatus::Identified
        );
        assert!(IncidentPatch::default()
            .update(IncidentStatus::Identified)
            .is_none());
    }
}
