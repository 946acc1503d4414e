//! `/metrics` as central serves it: who may read it on the public listener and how often it
//! is worked out. On `CENTRAL_LISTEN` a scrape must carry `CENTRAL_METRICS_TOKEN` (or the admin
//! token), since the text names every monitor, poller and region; `CENTRAL_METRICS_LISTEN` is
//! meant to be private and asks for nothing. However many scrape, the text is worked out at
//! most once every `RENDER_EVERY` (it reads every monitor's stored status): scrapers that
//! arrive together wait for one rendering, and later ones within the period get the same text.
//!
//! Cost: one rendering per `RENDER_EVERY` at most, which reads each monitor's and location's
//! stored status and latency once (`store::gauges`: no status is derived here), and the
//! pollers; O(1) per scrape besides. Must not: derive statuses, render per request, or keep
//! the token itself.

use std::time::{Duration, Instant};

use axum::body::Bytes;

use tokio::sync::Mutex;

use shared_proto::settings_api::PollerStatus;

use super::{admin_token, auth, App};
use crate::error::{error_chain, ApiResult};
use crate::metrics::{MonitorSample, PollerSample, StateParts, StateText};
use crate::store::Shown;

/// The longest a scrape's text may be old; below Prometheus' usual 15 s interval.
pub const RENDER_EVERY: Duration = Duration::from_secs(5);

pub struct Scrape {
    token_sha256: Option<String>,
    /// The state gauges as last rendered, shared by every scrape until `RENDER_EVERY` passed.
    rendered: Mutex<Rendered>,
}

#[derive(Default)]
struct Rendered {
    /// When `parts` were rendered; `None` before the first rendering.
    at: Option<Instant>,
    /// `StateParts` as shared bytes: each scrape sends them as they are, none copies them.
    parts: Vec<Bytes>,
    /// The monitor families' lengths at the last rendering that read them, which the next
    /// reserves (`StateText::new`).
    family_lens: [usize; 3],
}

impl Scrape {
    /// `token` is `CENTRAL_METRICS_TOKEN`; refused when easy to guess.
    pub fn new(token: Option<&str>) -> anyhow::Result<Scrape> {
        if let Some(token) = token {
            admin_token::check_strength("CENTRAL_METRICS_TOKEN", token)?;
        }
        Ok(Scrape {
            token_sha256: token.map(auth::sha256_hex),
            rendered: Mutex::default(),
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

    /// The state gauges of every monitor, location and poller (OpenMetrics text without its
    /// `# EOF`, identical in the older text format: gauges only), as parts to be sent in
    /// order, rendered at most once every `RENDER_EVERY`; a scrape gets the shared bytes, not
    /// a copy. If the state cannot be read the scrape gets none (and the counters still).
    pub async fn metrics_state(&self) -> Vec<Bytes> {
        let mut rendered = self.scrape.rendered.lock().await;
        if rendered.at.is_some_and(|at| at.elapsed() < RENDER_EVERY) {
            return rendered.parts.clone();
        }
        rendered.parts = match self.state_metrics(rendered.family_lens).await {
            Ok(parts) => {
                rendered.family_lens = parts.family_lens();
                parts.0.into_iter().map(Bytes::from).collect()
            }
            Err(e) => {
                tracing::warn!("reading state for /metrics failed: {}", error_chain(&e));
                Vec::new()
            }
        };
        rendered.at = Some(Instant::now());
        rendered.parts.clone()
    }

    /// The process's own metrics (counters, and gauges read at once, such as the results
    /// head's size), rendered per scrape as OpenMetrics text: O(1), a few lines.
    pub fn process_metrics(&self) -> String {
        let head = i64::try_from(self.store.results_head_len()).unwrap_or(i64::MAX);
        self.metrics.results_head_rows.set(head);
        self.metrics.render()
    }

    /// Each monitor's series are written as its row is read (`StateText`): the rows are not
    /// kept. `family_lens`: the last rendering's, reserved.
    async fn state_metrics(&self, family_lens: [usize; 3]) -> ApiResult<StateParts> {
        let text = self
            .store
            .fold_shown(StateText::new(family_lens), |text, row| {
                text.add(&sample_of(row));
            })
            .await?;
        let pollers = self.store.all_pollers().await?;
        let now = self.now_ms();
        let poller_samples: Vec<PollerSample> = pollers
            .iter()
            .map(|p| PollerSample {
                poller_id: &p.id,
                name: p.alias.as_deref().unwrap_or(&p.name),
                region: p.region.as_deref().unwrap_or_default(),
                status: match self.poller_status(p, now) {
                    PollerStatus::Online => "online",
                    PollerStatus::Offline => "offline",
                    PollerStatus::Degraded => "degraded",
                },
                queue_depth: p.queue_depth,
            })
            .collect();
        Ok(text.finish(&poller_samples))
    }
}

/// A stored row as its gauges: `up` is 1 for up, 0 for down or degraded, absent otherwise;
/// a monitor or location not looked at yet shows `pending`.
fn sample_of(row: Shown<'_>) -> MonitorSample<'_> {
    let status = row.status.unwrap_or("pending");
    let up = match status {
        "up" => Some(1),
        "down" | "degraded" => Some(0),
        _ => None,
    };
    MonitorSample {
        monitor_id: row.monitor_id,
        name: row.name,
        region: row.region.unwrap_or_default(),
        status,
        up,
        latency_ms: row.latency_ms,
    }
}
