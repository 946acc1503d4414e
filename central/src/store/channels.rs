//! The notification channels table: its row, the one translation each way between a row and
//! `domain::Channel` (lists and maps as JSON texts, the fields only some kinds have in one
//! `options` object), the operators' writes, and the reads alerting and delivery make.
//! Must not: decide who is told (`service::channels::tells`) or show a secret.

use std::collections::BTreeMap;

use anyhow::Context;
use shared_proto::notifications::{ChannelKind, ChannelSpec, WebhookFormat};
use sqlx::any::AnyRow;
use sqlx::{Any, FromRow, Row};

use crate::domain::{Channel, Recipient};

use super::{flag, Cursor, Paged, Store};

/// A channel as its delivery reads it: what became of it since its message was queued.
#[derive(Debug)]
pub enum ChannelRead {
    Found(Box<Channel>),
    /// Its row does not read (a kind or setting a newer replica wrote, or a hand edit): why.
    /// Its messages are failed attempts with this reason, given up in time, never left pending.
    Unreadable(String),
    /// Deleted: its deletion gave up its pending messages.
    Gone,
}

#[derive(Debug, Clone)]
struct ChannelRow {
    id: String,
    name: String,
    kind: String,
    url: Option<String>,
    secret: Option<String>,
    /// JSON object.
    headers: String,
    is_default: bool,
    email_from: Option<String>,
    /// JSON array.
    email_to: String,
    /// JSON object of the fields only some kinds have (`ChannelOptions`).
    options: String,
    /// JSON array: the tags whose monitors tell this channel.
    tags: String,
    created_at: i64,
    updated_at: i64,
}

/// What the `options` column holds: the fields only some kinds have.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct ChannelOptions {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    urls: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    format: Option<WebhookFormat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chat_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topic: Option<String>,
}

impl FromRow<'_, AnyRow> for ChannelRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            kind: row.try_get("kind")?,
            url: row.try_get("url")?,
            secret: row.try_get("secret")?,
            headers: row.try_get("headers")?,
            is_default: row.try_get::<i64, _>("is_default")? != 0,
            tags: row.try_get("tags")?,
            email_from: row.try_get("email_from")?,
            email_to: row.try_get("email_to")?,
            options: row.try_get("options")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    }
}

impl TryFrom<ChannelRow> for Channel {
    type Error = anyhow::Error;

    /// An error names the channel and the column that does not read.
    fn try_from(row: ChannelRow) -> anyhow::Result<Channel> {
        let id = row.id;
        let column = |name: &str| format!("channel {id}: its stored {name}");
        let kind = ChannelKind::parse(&row.kind)
            .ok_or_else(|| anyhow::anyhow!("a kind central does not know, `{}`", row.kind))
            .with_context(|| column("kind"))?;
        let options: ChannelOptions =
            serde_json::from_str(&row.options).with_context(|| column("options"))?;
        let spec = ChannelSpec {
            name: row.name,
            kind,
            url: row.url,
            secret: row.secret,
            headers: serde_json::from_str::<BTreeMap<String, String>>(&row.headers)
                .with_context(|| column("headers"))?,
            default: row.is_default,
            tags: serde_json::from_str(&row.tags).with_context(|| column("tags"))?,
            from: row.email_from,
            to: serde_json::from_str(&row.email_to).with_context(|| column("email_to"))?,
            urls: options.urls,
            format: options.format,
            template: options.template,
            chat_id: options.chat_id,
            user_key: options.user_key,
            topic: options.topic,
        };
        Ok(Channel {
            id,
            spec,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

impl ChannelRow {
    fn of(channel: &Channel) -> anyhow::Result<ChannelRow> {
        let spec = &channel.spec;
        Ok(ChannelRow {
            id: channel.id.clone(),
            name: spec.name.clone(),
            kind: spec.kind.as_str().to_string(),
            url: spec.url.clone(),
            secret: spec.secret.clone(),
            headers: serde_json::to_string(&spec.headers)?,
            is_default: spec.default,
            tags: serde_json::to_string(&spec.tags)?,
            email_from: spec.from.clone(),
            email_to: serde_json::to_string(&spec.to)?,
            options: serde_json::to_string(&ChannelOptions {
                urls: spec.urls.clone(),
                format: spec.format,
                template: spec.template.clone(),
                chat_id: spec.chat_id.clone(),
                user_key: spec.user_key.clone(),
                topic: spec.topic.clone(),
            })?,
            created_at: channel.created_at,
            updated_at: channel.updated_at,
        })
    }
}

const CHANNEL_COLUMNS: &str = "id, name, kind, url, secret, headers, is_default, email_from, \
    email_to, created_at, updated_at, options, tags";

fn bind_channel<'q>(
    query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
    row: &'q ChannelRow,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
    query
        .bind(&row.id)
        .bind(&row.name)
        .bind(&row.kind)
        .bind(&row.url)
        .bind(&row.secret)
        .bind(&row.headers)
        .bind(flag(row.is_default))
        .bind(&row.email_from)
        .bind(&row.email_to)
        .bind(row.created_at)
        .bind(row.updated_at)
        .bind(&row.options)
        .bind(&row.tags)
}

/// A recipient as stored: a kind this central does not know is `None`, a tag list that does
/// not read is empty (logged), so that every channel stays a recipient (`domain::Recipient`).
fn recipient_of(row: (String, String, i64, String)) -> Recipient {
    let (id, kind, is_default, tags) = row;
    let tags = serde_json::from_str(&tags).unwrap_or_else(|e| {
        tracing::error!(
            "channel {id}: its stored tags do not read ({e}); it is told as if it had none"
        );
        Vec::new()
    });
    Recipient {
        kind: ChannelKind::parse(&kind),
        default: is_default != 0,
        tags,
        id,
    }
}

impl Store {
    pub async fn insert_channel(&self, channel: &Channel) -> anyhow::Result<()> {
        let row = ChannelRow::of(channel)?;
        let _guard = self.write_lock().await;
        let sql = format!(
            "INSERT INTO notification_channels ({CHANNEL_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
        );
        bind_channel(sqlx::query(&sql), &row)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Rewrites a channel; `false` if there is no such channel.
    pub async fn update_channel(&self, channel: &Channel) -> anyhow::Result<bool> {
        let row = ChannelRow::of(channel)?;
        let _guard = self.write_lock().await;
        let done = bind_channel(
            sqlx::query(
                "UPDATE notification_channels SET name = $2, kind = $3, url = $4, secret = $5, \
                 headers = $6, is_default = $7, email_from = $8, email_to = $9, \
                 created_at = $10, updated_at = $11, options = $12, tags = $13 WHERE id = $1",
            ),
            &row,
        )
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes a channel; its undelivered notifications are given up. `false` if unknown.
    pub async fn delete_channel(&self, id: &str) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query("DELETE FROM notification_channels WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE notifications SET status = 'failed', last_error = 'the channel was deleted', \
             next_attempt_at = NULL WHERE channel_id = $1 AND status = 'pending'",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// A channel; an error naming it and its column if it does not read.
    pub async fn channel(&self, id: &str) -> anyhow::Result<Option<Channel>> {
        match self.channel_to_deliver(id).await? {
            ChannelRead::Found(channel) => Ok(Some(*channel)),
            ChannelRead::Unreadable(why) => Err(anyhow::anyhow!(why)),
            ChannelRead::Gone => Ok(None),
        }
    }

    /// A channel as its delivery reads it afresh for each message (`ChannelRead`).
    pub async fn channel_to_deliver(&self, id: &str) -> anyhow::Result<ChannelRead> {
        let sql = format!("SELECT {CHANNEL_COLUMNS} FROM notification_channels WHERE id = $1");
        let row: Option<ChannelRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row.map(Channel::try_from) {
            Some(Ok(channel)) => ChannelRead::Found(Box::new(channel)),
            Some(Err(e)) => ChannelRead::Unreadable(format!("{e:#}")),
            None => ChannelRead::Gone,
        })
    }

    /// Whether there is a channel `id` (readable or not).
    pub async fn channel_exists(&self, id: &str) -> anyhow::Result<bool> {
        let found: Option<(i64,)> =
            sqlx::query_as("SELECT 1 FROM notification_channels WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(found.is_some())
    }

    /// Every channel as alerting picks recipients, none left out (`domain::Recipient`). Costs
    /// a read of every channel (channels are few); alerting makes it once per round that
    /// tells someone.
    pub async fn recipients(&self) -> anyhow::Result<Vec<Recipient>> {
        let rows: Vec<(String, String, i64, String)> =
            sqlx::query_as("SELECT id, kind, is_default, tags FROM notification_channels")
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(recipient_of).collect())
    }

    /// A page of channels by creation (one that does not read left out, logged).
    pub async fn list_channels(
        &self,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Paged<Channel>> {
        let rows: Vec<ChannelRow> = self
            .page_by_creation(CHANNEL_COLUMNS, "notification_channels", after, limit)
            .await?;
        Ok(Paged::of("channel", rows, limit, |r| Cursor {
            key: r.created_at,
            id: r.id.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use shared_proto::notifications::{ChannelKind, ChannelSpec, WebhookFormat};

    use super::ChannelRead;
    use crate::domain::{Channel, Recipient};
    use crate::store::testing::sqlite_store;
    use crate::store::Cursor;

    fn channel(id: &str, created_at: i64) -> Channel {
        Channel {
            id: id.into(),
            spec: ChannelSpec {
                name: format!("hook {id}"),
                kind: ChannelKind::Webhook,
                url: Some("http://127.0.0.1:9/hook".into()),
                secret: Some("s3cret".into()),
                headers: BTreeMap::from([("X-Team".into(), "db".into())]),
                default: false,
                tags: vec!["db".into()],
                from: None,
                to: Vec::new(),
                urls: Vec::new(),
                format: Some(WebhookFormat::Notification),
                template: None,
                chat_id: None,
                user_key: None,
                topic: None,
            },
            created_at,
            updated_at: created_at,
        }
    }

    /// A channel reads back as it was written. One whose kind a newer central wrote is an
    /// error naming it and the column when read alone, a failed delivery with that reason
    /// (never pending for ever), left out of the list (which goes on past it), and still a
    /// recipient: alerting tells it, so its messages are delivered by a replica that reads it
    /// or visibly given up, instead of never being written.
    #[tokio::test]
    async fn a_channel_that_does_not_read_is_still_told_and_its_delivery_says_why() {
        let (store, _dir) = sqlite_store().await;
        let (a, b) = (channel("a", 1), channel("b", 2));
        store.insert_channel(&a).await.unwrap();
        store.insert_channel(&b).await.unwrap();
        assert_eq!(store.channel("a").await.unwrap(), Some(a.clone()));

        sqlx::query("UPDATE notification_channels SET kind = 'pigeon' WHERE id = 'a'")
            .execute(&store.writer)
            .await
            .unwrap();
        let said = format!("{:#}", store.channel("a").await.unwrap_err());
        assert!(
            said.contains("channel a") && said.contains("kind"),
            "{said}"
        );
        match store.channel_to_deliver("a").await.unwrap() {
            ChannelRead::Unreadable(why) => assert!(why.contains("pigeon"), "{why}"),
            other => panic!("read as {other:?}"),
        }
        assert!(matches!(
            store.channel_to_deliver("gone").await.unwrap(),
            ChannelRead::Gone
        ));
        assert!(store.channel_exists("a").await.unwrap());
        let recipients = store.recipients().await.unwrap();
        let unread = Recipient {
            kind: None,
            ..a.recipient()
        };
        assert!(recipients.contains(&unread), "{recipients:?}");
        assert!(recipients.contains(&b.recipient()), "{recipients:?}");

        let first = store.list_channels(&Cursor::start(), 1).await.unwrap();
        assert!(first.items.is_empty());
        let rest = store
            .list_channels(&first.next.expect("the list goes on"), 1)
            .await
            .unwrap();
        assert_eq!(rest.items, [b]);

        // A tag list that does not read leaves the channel told as if it had no tags.
        sqlx::query("UPDATE notification_channels SET kind = 'webhook', tags = '{' WHERE id = 'a'")
            .execute(&store.writer)
            .await
            .unwrap();
        let told = store.recipients().await.unwrap();
        let a_told = told.iter().find(|r| r.id == "a").unwrap();
        assert_eq!(a_told.kind, Some(ChannelKind::Webhook));
        assert!(a_told.tags.is_empty());
    }
}
