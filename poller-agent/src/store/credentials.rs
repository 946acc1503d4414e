//! The poller's identity and tokens, kept so that a restart does not register a second poller.

use chrono::{DateTime, Utc};
use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::LocalStore;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Credentials {
    pub poller_id: Uuid,
    pub access_token: String,
    pub access_expires_at: DateTime<Utc>,
    pub refresh_token: String,
}

const KEY: &str = "credentials";

impl LocalStore {
    pub async fn credentials(&self) -> anyhow::Result<Option<Credentials>> {
        let text: Option<String> = self
            .with_conn(|c| {
                c.query_row(
                    "SELECT value FROM poller_state WHERE key = ?1",
                    [KEY],
                    |r| r.get(0),
                )
                .optional()
            })
            .await?;
        Ok(text.map(|t| serde_json::from_str(&t)).transpose()?)
    }

    /// Saves credentials durably; called before a new refresh token is ever used, so that a
    /// crash cannot leave the agent holding only a spent one.
    pub async fn save_credentials(&self, credentials: &Credentials) -> anyhow::Result<()> {
        let text = serde_json::to_string(credentials)?;
        self.with_conn(move |c| {
            c.execute(
                "INSERT INTO poller_state (key, value) VALUES (?1, ?2) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (KEY, text),
            )
            .map(|_| ())
        })
        .await
    }
}
