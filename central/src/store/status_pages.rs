//! `status_pages`: the pages visitors read, as operators wrote them (sections as their JSON,
//! the password as its argon2 hash). Cost: by id or slug through the primary key and the
//! unique index; the list pages by `(created_at, id)`; `all_status_pages` reads every page
//! (a few, for the shared rendering's address book, at most once a second; their logos with
//! them, at most 64 KiB each). Must not: decide
//! what a page shows or who may read it (`service::status_pages`).

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::{Cursor, Store};

pub(super) const COLUMNS: &str =
    "id, slug, title, description, sections, visibility, password_hash, \
     domain, created_at, updated_at, auto_incidents, logo";

/// A page as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusPageRow {
    pub id: String,
    pub slug: String,
    pub title: String,
    pub description: Option<String>,
    /// The sections as the operator wrote them, JSON.
    pub sections: String,
    pub visibility: String,
    pub password_hash: Option<String>,
    pub domain: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    /// `off`, `draft` or `publish`.
    pub auto_incidents: String,
    /// The logo's `data:` URL.
    pub logo: Option<String>,
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
        row: &StatusPageRow,
        replaces: bool,
    ) -> Result<bool, PageConflict> {
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

    pub async fn status_page(&self, id: &str) -> anyhow::Result<Option<StatusPageRow>> {
        let sql = format!("SELECT {COLUMNS} FROM status_pages WHERE id = $1");
        Ok(sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    pub async fn list_status_pages(
        &self,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Vec<StatusPageRow>> {
        self.page_by_creation(COLUMNS, "status_pages", after, limit)
            .await
    }

    /// Every page: the shared rendering's address book (by slug and by domain).
    pub async fn all_status_pages(&self) -> anyhow::Result<Vec<StatusPageRow>> {
        let sql = format!("SELECT {COLUMNS} FROM status_pages ORDER BY created_at, id");
        Ok(sqlx::query_as(&sql).fetch_all(&self.pool).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    fn page(id: &str, slug: &str, domain: Option<&str>) -> StatusPageRow {
        StatusPageRow {
            id: id.into(),
            slug: slug.into(),
            title: "Acme".into(),
            description: None,
            sections: "[]".into(),
            visibility: "public".into(),
            password_hash: None,
            domain: domain.map(str::to_string),
            created_at: 1,
            updated_at: 1,
            auto_incidents: "off".into(),
            logo: None,
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
        assert!(store.delete_status_page("b").await.unwrap());
        assert!(!store.delete_status_page("b").await.unwrap());
        assert!(!store
            .put_status_page(&page("b", "b", None), true)
            .await
            .unwrap());
    }
}
