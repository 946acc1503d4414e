//! What operators do to every monitor carrying a tag at once: pause and resume. Each monitor
//! goes through the same edit as a `PATCH` (`monitors::update_monitor`), so revisions,
//! assignment versions and placement follow as for one. Must not: match tags itself (the
//! store's `monitor_tags` does) or decide statuses.
//!
//! Cost: a read of the tag's monitors through `monitor_tags`' primary key, and an edit per
//! monitor whose state changes; at most `MAX_TAGGED` monitors per request.

use shared_proto::tags::{TagSelection, TaggedChange};
use shared_proto::{MonitorPatch, ValidationError};

use super::{stored_id, App};
use crate::service::error::ServiceResult;

/// The most monitors one pause or resume by tag changes: a request's work stays bounded, and
/// a tag on more monitors is most likely a mistake (pause them by region with a maintenance
/// window instead).
pub const MAX_TAGGED: usize = 5_000;

impl App {
    /// Pauses (`paused`) or resumes every monitor carrying the tag; those already so are left
    /// as they are (no new revision).
    pub async fn pause_tagged(
        &self,
        selection: TagSelection,
        paused: bool,
    ) -> ServiceResult<TaggedChange> {
        selection.validate()?;
        let ids = self.store.monitors_tagged(&selection.tag).await?;
        if ids.len() > MAX_TAGGED {
            return Err(ValidationError::value(
                "tag",
                format!(
                    "{} monitors carry `{}`; one request changes at most {MAX_TAGGED}",
                    ids.len(),
                    selection.tag
                ),
            )
            .into());
        }
        let mut changed = 0;
        for id in &ids {
            let Some(row) = self.store.monitor(id).await? else {
                continue; // deleted meanwhile
            };
            if row.paused == paused {
                continue;
            }
            let patch = MonitorPatch {
                paused: Some(paused),
                ..Default::default()
            };
            match self.update_monitor(stored_id(id)?, patch, None).await {
                Ok(_) => changed += 1,
                // Deleted between the read and the edit: nothing to change.
                Err(crate::service::error::ServiceError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(TaggedChange {
            tag: selection.tag,
            matched: ids.len() as u64,
            changed,
        })
    }
}
