//! `/metrics` as central serves it: who may read it on the public listener and how often it
//! is worked out. On `CENTRAL_LISTEN` a scrape must carry `CENTRAL_METRICS_TOKEN` (or the admin
//! token), since the text names every monitor, poller and region; `CENTRAL_METRICS_LISTEN` is
//! meant to be private and asks for nothing. However many scrape, the text is worked out at
//! most once every `RENDER_EVERY` (it reads every monitor's status): scrapers that arrive
//! together wait for one rendering, and later ones within the period get the same text.
//!
//! Cost: one rendering (proportional to monitors and pollers) per `RENDER_EVERY` at most, and
//! O(1) per scrape besides. Must not: render per request, or keep the token itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use super::{admin_token, auth, App};
use crate::error::ApiResult;

/// The longest a scrape's text may be old; below Prometheus' usual 15 s interval.
pub const RENDER_EVERY: Duration = Duration::from_secs(5);

pub struct Scrape {
    token_sha256: Option<String>,
    rendered: Mutex<Option<(Instant, Arc<String>)>>,
}

impl Scrape {
    /// `token` is `CENTRAL_METRICS_TOKEN`; refused when easy to guess.
    pub fn new(token: Option<&str>) -> anyhow::Result<Scrape> {
        if let Some(token) = token {
            admin_token::check_strength("CENTRAL_METRICS_TOKEN", token)?;
        }
        Ok(Scrape {
            token_sha256: token.map(auth::sha256_hex),
            rendered: Mutex::new(None),
        })
    }
}

impl App {
    /// Whether `token` is `CENTRAL_METRICS_TOKEN` (memory only: a high-entropy secret from the
    /// environment, so one SHA-256 is enough).
    pub fn is_metrics_token(&self, token: &str) -> bool {
        self.scrape
            .token_sha256
            .as_deref()
            .is_some_and(|hash| auth::constant_time_eq(&auth::sha256_hex(token), hash))
    }

    /// Whether `token` may read `/metrics` on the public listener.
    pub async fn may_scrape(&self, token: &str) -> ApiResult<bool> {
        Ok(self.is_metrics_token(token) || self.verify_admin_token(token).await?)
    }

    /// The metrics text, rendered at most once every `RENDER_EVERY`.
    pub async fn metrics_text(&self) -> Arc<String> {
        let mut rendered = self.scrape.rendered.lock().await;
        if let Some((at, text)) = &*rendered {
            if at.elapsed() < RENDER_EVERY {
                return text.clone();
            }
        }
        let text = Arc::new(self.render_metrics().await);
        *rendered = Some((Instant::now(), text.clone()));
        text
    }
}
