//! Status pages: the operators' CRUD (`StatusPages`), and what a visitor of a page is shown
//! (`shown`): the page's monitors under their display names, their status, 90 daily bars and
//! uptime, and nothing else of them (no target, poller, region or message).
//!
//! A service of its own, holding the store, the clock and the password hasher; handlers take
//! it from the router's state (`FromRef`). Cost: a write is one row; what visitors read is put
//! together by `shown` at most every few seconds per page (the web layer shares it between
//! readers). Must not: render HTML (`web::status_pages`) or write SQL.

pub mod access;
pub mod auto;
pub mod incidents;
pub mod maintenance_notices;
pub mod shown;
pub mod subscribers;

use std::collections::HashSet;
use std::sync::Arc;

use shared_proto::settings_api::Page;
use shared_proto::status_pages::{
    StatusPagePatch, StatusPageSection, StatusPageSpec, StatusPageView, Visibility,
};
use shared_proto::ValidationError;
use uuid::Uuid;

use super::clock::Clock;
use super::hashing::Hashing;
use super::tokens::page_of;
use super::{time_of, App};
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{Cursor, PageConflict, Store};

/// The status pages' service.
#[derive(Clone)]
pub struct StatusPages {
    store: Arc<Store>,
    clock: Clock,
    hashing: Hashing,
    /// `CENTRAL_PUBLIC_URL`: the links in subscribers' notices start with it.
    public_url: Option<String>,
    /// Whether central has a mail server of its own (`CENTRAL_MAIL_URL`).
    sends_mail: bool,
}

impl App {
    /// The status pages' service, on this central's store, clock and hasher.
    pub fn status_pages(&self) -> StatusPages {
        StatusPages {
            store: self.store.clone(),
            clock: self.clock.clone(),
            hashing: self.credentials.hashing.clone(),
            public_url: self.public_url.clone(),
            sends_mail: self.notifier.sends_mail(),
        }
    }
}

impl axum::extract::FromRef<Arc<App>> for StatusPages {
    fn from_ref(app: &Arc<App>) -> Self {
        app.status_pages()
    }
}

pub use crate::domain::{PageLogo, StatusPage};

/// What the API shows of a page, and what an edit starts from.
trait Shown {
    fn view(&self) -> StatusPageView;
    fn spec(&self) -> StatusPageSpec;
}

impl Shown for StatusPage {
    fn view(&self) -> StatusPageView {
        StatusPageView {
            id: self.id,
            slug: self.slug.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            sections: self.sections.clone(),
            visibility: self.visibility,
            has_password: self.password_hash.is_some(),
            domain: self.domain.clone(),
            auto_incidents: self.auto_incidents,
            logo: self.logo.as_ref().map(|(url, _)| url.clone()),
            path: format!("/status/{}", self.slug),
            created_at: time_of(self.created_at),
            updated_at: time_of(self.updated_at),
        }
    }

    fn spec(&self) -> StatusPageSpec {
        StatusPageSpec {
            slug: self.slug.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            sections: self.sections.clone(),
            visibility: self.visibility,
            password: None,
            domain: self.domain.clone(),
            auto_incidents: self.auto_incidents,
            logo: self.logo.as_ref().map(|(url, _)| url.clone()),
        }
    }
}

impl StatusPages {
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    pub async fn create_page(&self, spec: StatusPageSpec) -> ServiceResult<StatusPageView> {
        spec.validate(false)?;
        self.check_monitors(&spec.sections, &HashSet::new()).await?;
        let now = self.now_ms();
        let password_hash = match &spec.password {
            Some(password) => Some(self.hashing.hash(password.clone()).await?),
            None => None,
        };
        let page = written(Uuid::new_v4(), &spec, password_hash, now, now);
        self.write(&page, false, &spec).await?;
        Ok(page.view())
    }

    pub async fn get_page(&self, id: Uuid) -> ServiceResult<StatusPageView> {
        Ok(self.stored(id).await?.view())
    }

    pub async fn list_pages(
        &self,
        cursor: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<StatusPageView>> {
        let pages = self.store.list_status_pages(cursor, limit).await?;
        Ok(page_of(pages, |page| Ok(page.view()))?)
    }

    pub async fn update_page(
        &self,
        id: Uuid,
        patch: StatusPagePatch,
    ) -> ServiceResult<StatusPageView> {
        patch.validate_fields()?;
        let page = self.stored(id).await?;
        let mut spec = page.spec();
        spec.apply(patch);
        spec.validate(page.password_hash.is_some())
            .map_err(|e| super::patch_does_not_fit(e.into()))?;
        // A monitor deleted since the page named it is not shown, and does not stop an edit.
        let named_before: HashSet<Uuid> = page
            .sections
            .iter()
            .flat_map(|s| s.monitor_ids.iter().copied())
            .collect();
        self.check_monitors(&spec.sections, &named_before).await?;
        // A page that is no longer a password page forgets its password.
        let password_hash = match (&spec.password, spec.visibility) {
            (Some(password), _) => Some(self.hashing.hash(password.clone()).await?),
            (None, Visibility::Password) => page.password_hash.clone(),
            (None, _) => None,
        };
        let page = written(id, &spec, password_hash, page.created_at, self.now_ms());
        if !self.write(&page, true, &spec).await? {
            return Err(ServiceError::NotFound(format!(
                "no status page with id {id}"
            )));
        }
        Ok(page.view())
    }

    pub async fn delete_page(&self, id: Uuid) -> ServiceResult<()> {
        if self.store.delete_status_page(&id.to_string()).await? {
            Ok(())
        } else {
            Err(ServiceError::NotFound(format!(
                "no status page with id {id}"
            )))
        }
    }

    /// Every page, for the shared rendering's address book.
    pub async fn all_pages(&self) -> ServiceResult<Vec<StatusPage>> {
        Ok(self.store.all_status_pages().await?)
    }

    /// The page `id` as the rest of central reads it.
    pub async fn page_by_id(&self, id: Uuid) -> ServiceResult<StatusPage> {
        self.stored(id).await
    }

    /// `CENTRAL_PUBLIC_URL`, which subscribers' links start with.
    pub fn public_url(&self) -> Option<&str> {
        self.public_url.as_deref()
    }

    async fn stored(&self, id: Uuid) -> ServiceResult<StatusPage> {
        match self.store.status_page(&id.to_string()).await? {
            Some(page) => Ok(page),
            None => Err(ServiceError::NotFound(format!(
                "no status page with id {id}"
            ))),
        }
    }

    /// Writes the row; a slug or domain another page has is a conflict naming which.
    async fn write(
        &self,
        page: &StatusPage,
        replaces: bool,
        spec: &StatusPageSpec,
    ) -> ServiceResult<bool> {
        match self.store.put_status_page(page, replaces).await {
            Ok(written) => Ok(written),
            Err(PageConflict::Taken) => Err(ServiceError::Conflict(match &spec.domain {
                Some(domain) => format!(
                    "another status page has the slug `{}` or the domain `{domain}`",
                    spec.slug
                ),
                None => format!("another status page has the slug `{}`", spec.slug),
            })),
            Err(PageConflict::Store(error)) => Err(error.into()),
        }
    }

    /// Every monitor a section names by id exists, but those the page named already (those
    /// named by tag are whoever carries the tag when the page is read).
    async fn check_monitors(
        &self,
        sections: &[StatusPageSection],
        named_before: &HashSet<Uuid>,
    ) -> ServiceResult<()> {
        let named: Vec<String> = sections
            .iter()
            .flat_map(|s| s.monitor_ids.iter())
            .filter(|id| !named_before.contains(id))
            .map(Uuid::to_string)
            .collect();
        if named.is_empty() {
            return Ok(());
        }
        let known: HashSet<String> = self
            .store
            .monitors_by_ids(&named)
            .await?
            .into_iter()
            .map(|m| m.id)
            .collect();
        for (i, section) in sections.iter().enumerate() {
            for (j, id) in section.monitor_ids.iter().enumerate() {
                if !named_before.contains(id) && !known.contains(&id.to_string()) {
                    return Err(ValidationError::reference(
                        format!("sections[{i}].monitor_ids[{j}]"),
                        format!("no monitor with id {id}"),
                    )
                    .into());
                }
            }
        }
        Ok(())
    }
}

fn written(
    id: Uuid,
    spec: &StatusPageSpec,
    password_hash: Option<String>,
    created_at: i64,
    updated_at: i64,
) -> StatusPage {
    StatusPage {
        id,
        slug: spec.slug.clone(),
        title: spec.title.clone(),
        description: spec.description.clone(),
        sections: spec.sections.clone(),
        visibility: spec.visibility,
        password_hash,
        domain: spec.domain.clone(),
        auto_incidents: spec.auto_incidents,
        logo: spec.logo.as_deref().and_then(PageLogo::of),
        created_at,
        updated_at,
    }
}
