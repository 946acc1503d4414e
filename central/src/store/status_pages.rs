//! `status_pages`: the pages visitors read, as operators wrote them (sections as their JSON,
//! the password as its argon2 hash). Cost: by id or slug through the primary key and the
//! unique index; the list pages by `(created_at, id)`; `all_status_pages` reads every page
//! (a few, for the shared rendering's address book, at most once a second; their logos with
//! them, at most 64 KiB each). Must not: decide
//! what a page shows or who may read it (`service::status_pages`).

use anyhow::Context;
use shared_proto::status_pages::{AutoIncidents, Visibility};
use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::readable::readable;
use super::{Cursor, Paged, Store};
use crate::domain::{PageLogo, StatusPage};

pub(super) const COLUMNS: &str =
    "id, slug, title, description, sections, visibility, password_hash, \
     domain, created_at, updated_at, auto_incidents, logo";

/// A page as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StatusPageRow {
    id: String,
    slug: String,
    title: String,
    description: Option<String>,
    /// The sections as the operator wrote them, JSON.
    sections: String,
    visibility: String,
    password_hash: Option<String>,
    domain: Option<String>,
    created_at: i64,
    updated_at: i64,
    /// `off`, `draft` or `publish`.
    auto_incidents: String,
    /// The logo's `data:` URL.
    logo: Option<String>,
}

impl TryFrom<StatusPageRow> for StatusPage {
    type Error = anyhow::Error;

    /// An error names the page and the column that does not read.
    fn try_from(row: StatusPageRow) -> anyhow::Result<StatusPage> {
        let id = row.id;
        let column = |name: &str| format!("status page {id}: its stored {name}");
        Ok(StatusPage {
            id: id.parse().with_context(|| column("id"))?,
            sections: serde_json::from_str(&row.sections).with_context(|| column("sections"))?,
            visibility: Visibility::parse(&row.visibility)
                .ok_or_else(|| {
                    anyhow::anyhow!("a visibility central does not know, `{}`", row.visibility)
                })
                .with_context(|| column("visibility"))?,
            // A value this central does not know (written by a newer one) opens nothing.
            auto_incidents: AutoIncidents::parse(&row.auto_incidents).unwrap_or_default(),
            // Checked when written; one that no longer decodes is not shown.
            logo: row.logo.as_deref().and_then(PageLogo::of),
            slug: row.slug,
            title: row.title,
            description: row.description,
            password_hash: row.password_hash,
            domain: row.domain,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

impl StatusPageRow {
    fn of(page: &StatusPage) -> anyhow::Result<StatusPageRow> {
        Ok(StatusPageRow {
            id: page.id.to_string(),
            slug: page.slug.clone(),
            title: page.title.clone(),
            description: page.description.clone(),
            sections: serde_json::to_string(&page.sections)?,
            visibility: page.visibility.as_str().to_string(),
            password_hash: page.password_hash.clone(),
            domain: page.domain.clone(),
            created_at: page.created_at,
            updated_at: page.updated_at,
            auto_incidents: page.auto_incidents.as_str().to_string(),
            logo: page.logo.as_ref().map(|(url, _)| url.clone()),
        })
    }
}

impl FromRow<'_, AnyRow> for StatusPageRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            slug: row.try_get("slug")?,
            title: row.try_get("title")?,
            description: row.try_get("description")?,
            sections: row.try_get("sections")?,
            visibility: row.try_get("visibility")?,
            password_hash: row.try_get("password_hash")?,
            domain: row.try_get("domain")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
            auto_incidents: row.try_get("auto_incidents")?,
            logo: row.try_get("logo")?,
        })
    }
}

/// Why a page could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PageConflict {
    /// Another page has the slug or the domain (the unique indexes say which).
    #[error("another status page has this slug or domain")]
    Taken,
    #[error(transparent)]
    Store(#[from] anyhow::Error),
}

impl From<sqlx::Error> for PageConflict {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::Database(e) if e.is_unique_violation() => PageConflict::Taken,
            _ => PageConflict::Store(error.into()),
        }
    }
}

impl Store {
    /// Adds a page (`replaces: false`) or overwrites the one with its id; `false` when it
    /// overwrote nothing (the page was deleted meanwhile).
    pub async fn put_status_page(
        &self,
        page: &StatusPage,
        replaces: bool,
    ) -> Result<bool, PageConflict> {
        let row = StatusPageRow::of(page)?;
        let _guard = self.write_lock().await;
        let sql = if replaces {
            "UPDATE status_pages SET slug = $2, title = $3, description = $4, sections = $5, \
             visibility = $6, password_hash = $7, domain = $8, created_at = $9, \
             updated_at = $10, auto_incidents = $11, logo = $12 WHERE id = $1"
                .to_string()
        } else {
            format!(
                "INSERT INTO status_pages ({COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
            )
        };
        let done = sqlx::query(&sql)
            .bind(&row.id)
            .bind(&row.slug)
            .bind(&row.title)
            .bind(&row.description)
            .bind(&row.sections)
            .bind(&row.visibility)
            .bind(&row.password_hash)
            .bind(&row.domain)
            .bind(row.created_at)
            .bind(row.updated_at)
            .bind(&row.auto_incidents)
            .bind(&row.logo)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes a page, its incidents and their updates, its subscribers and their notices, in
    /// one transaction; `false` if there
    /// was no such page.
    pub async fn delete_status_page(&self, id: &str) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query("DELETE FROM status_pages WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        sqlx::query(
            "DELETE FROM status_incident_updates WHERE incident_id IN \
             (SELECT id FROM status_incidents WHERE page_id = $1)",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM status_incidents WHERE page_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        super::status_subscribers::forget_page(&mut tx, id).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// A page; an error naming it and its column if it does not read.
    pub async fn status_page(&self, id: &str) -> anyhow::Result<Option<StatusPage>> {
        let sql = format!("SELECT {COLUMNS} FROM status_pages WHERE id = $1");
        let row: Option<StatusPageRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(StatusPage::try_from).transpose()
    }

    /// A page of pages by creation (one that does not read left out, logged).
    pub async fn list_status_pages(
        &self,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Paged<StatusPage>> {
        let rows: Vec<StatusPageRow> = self
            .page_by_creation(COLUMNS, "status_pages", after, limit)
            .await?;
        Ok(Paged::of("status page", rows, limit, |r| Cursor {
            key: r.created_at,
            id: r.id.clone(),
        }))
    }

    /// Every page: the shared rendering's address book (by slug and by domain). One that
    /// does not read is left out (logged): its address answers `404`, the others are served.
    pub async fn all_status_pages(&self) -> anyhow::Result<Vec<StatusPage>> {
        let sql = format!("SELECT {COLUMNS} FROM status_pages ORDER BY created_at, id");
        let rows: Vec<StatusPageRow> = sqlx::query_as(&sql).fetch_all(&self.pool).await?;
        Ok(readable("status page", rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    /// The id of page `n` (a hex digit).
    fn id(n: &str) -> String {
        format!("00000000-0000-0000-0000-00000000000{n}")
    }

    fn page(n: &str, slug: &str, domain: Option<&str>) -> StatusPage {
        StatusPage {
            id: id(n).parse().unwrap(),
            slug: slug.into(),
            title: "Acme".into(),
            description: None,
            sections: Vec::new(),
            visibility: Visibility::Public,
            password_hash: None,
            domain: domain.map(str::to_string),
            auto_incidents: AutoIncidents::Off,
            logo: None,
            created_at: 1,
            updated_at: 1,
        }
    }

    #[tokio::test]
    async fn slugs_and_domains_are_each_one_pages() {
        let (store, _dir) = sqlite_store().await;
        assert!(store
            .put_status_page(&page("a", "acme", Some("status.acme.test")), false)
            .await
            .unwrap());
        let taken = store.put_status_page(&page("b", "acme", None), false).await;
        assert!(matches!(taken, Err(PageConflict::Taken)), "{taken:?}");
        let taken = store
            .put_status_page(&page("b", "other", Some("status.acme.test")), false)
            .await;
        assert!(matches!(taken, Err(PageConflict::Taken)), "{taken:?}");
        // Pages without a domain do not collide on it.
        store
            .put_status_page(&page("b", "b", None), false)
            .await
            .unwrap();
        store
            .put_status_page(&page("c", "c", None), false)
            .await
            .unwrap();
        assert_eq!(store.all_status_pages().await.unwrap().len(), 3);
        assert!(store.delete_status_page(&id("b")).await.unwrap());
        assert!(!store.delete_status_page(&id("b")).await.unwrap());
        assert!(!store
            .put_status_page(&page("b", "b", None), true)
            .await
            .unwrap());
    }

    /// A page reads back as written; one whose visibility a newer central wrote is an error
    /// naming it and the column when read alone, and left out of the address book and the
    /// list (which goes on past it), so the other pages are still served.
    #[tokio::test]
    async fn a_page_that_does_not_read_is_left_out_and_named() {
        let (store, _dir) = sqlite_store().await;
        let a = page("a", "a", None);
        store.put_status_page(&a, false).await.unwrap();
        store
            .put_status_page(&page("b", "b", None), false)
            .await
            .unwrap();
        let read = store.status_page(&id("a")).await.unwrap().unwrap();
        assert_eq!(
            (read.id, read.slug, read.visibility),
            (a.id, a.slug, a.visibility)
        );
        sqlx::query("UPDATE status_pages SET visibility = 'secret' WHERE slug = 'a'")
            .execute(&store.writer)
            .await
            .unwrap();
        let said = format!("{:#}", store.status_page(&id("a")).await.unwrap_err());
        assert!(
            said.contains(&id("a")) && said.contains("visibility"),
            "{said}"
        );
        let served: Vec<String> = store
            .all_status_pages()
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.slug)
            .collect();
        assert_eq!(served, ["b"]);
        let first = store.list_status_pages(&Cursor::start(), 1).await.unwrap();
        assert!(first.items.is_empty());
        let rest = store
            .list_status_pages(&first.next.expect("the list goes on"), 1)
            .await
            .unwrap();
        assert_eq!(rest.items.len(), 1);
    }
}
