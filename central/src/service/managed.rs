//! Which objects a configuration file manages (`central apply`), each under the stable key the
//! file names it by. Owns the marks' rules: a key's form, that the object exists, one key per
//! object. What a file says and how it is applied is `cli`'s, through the settings API.

use shared_proto::as_code::{validate_key, ManagedKind, ManagedObject};
use shared_proto::ValidationError;
use uuid::Uuid;

use super::{stored_id, time_of, App};
use crate::service::error::{ServiceError, ServiceResult};

impl App {
    /// Every mark, or those of one kind.
    pub async fn managed_objects(
        &self,
        kind: Option<ManagedKind>,
    ) -> ServiceResult<Vec<ManagedObject>> {
        let rows = self
            .store
            .managed_objects(kind.map(ManagedKind::as_str))
            .await?;
        rows.into_iter()
            .filter_map(|(kind, key, object_id, applied_at)| {
                // A kind this build does not know was written by a newer one: not shown.
                let kind = ManagedKind::parse(&kind)?;
                Some(stored_id(&object_id).map(|object_id| ManagedObject {
                    kind,
                    key,
                    object_id,
                    applied_at: time_of(applied_at),
                }))
            })
            .collect::<anyhow::Result<_>>()
            .map_err(ServiceError::from)
    }

    /// Marks `object_id` as the file's `key`; `422 unknown_reference` when no such object exists.
    pub async fn manage_object(
        &self,
        kind: ManagedKind,
        key: &str,
        object_id: Uuid,
    ) -> ServiceResult<ManagedObject> {
        validate_key("key", key)?;
        let exists = match kind {
            ManagedKind::Monitors => self.get_monitor(object_id).await.is_ok(),
            ManagedKind::NotificationChannels => {
                self.channels().get_channel(object_id).await.is_ok()
            }
            ManagedKind::MaintenanceWindows => {
                self.maintenance().get_window(object_id).await.is_ok()
            }
            ManagedKind::StatusPages => self.status_pages().get_page(object_id).await.is_ok(),
        };
        if !exists {
            return Err(ValidationError::reference(
                "object_id",
                format!("no {} with id {object_id}", kind.as_str()),
            )
            .into());
        }
        let now = self.now_ms();
        self.store
            .put_managed(kind.as_str(), key, &object_id.to_string(), now)
            .await?;
        Ok(ManagedObject {
            kind,
            key: key.to_string(),
            object_id,
            applied_at: time_of(now),
        })
    }

    /// Removes the mark (the object stays); `404` when there was none.
    pub async fn unmanage_object(&self, kind: ManagedKind, key: &str) -> ServiceResult<()> {
        if !self.store.delete_managed(kind.as_str(), key).await? {
            return Err(ServiceError::NotFound(format!(
                "no {} is managed under the key `{key}`",
                kind.as_str()
            )));
        }
        Ok(())
    }

    /// The key a file manages this object by, for the page's mark.
    pub async fn managed_key(
        &self,
        kind: ManagedKind,
        object_id: Uuid,
    ) -> ServiceResult<Option<String>> {
        Ok(self
            .store
            .managed_key(kind.as_str(), &object_id.to_string())
            .await?)
    }
}
