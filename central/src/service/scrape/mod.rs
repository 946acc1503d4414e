//! `/metrics` as central serves it: who may read it on the public listener and how often it
//! is worked out. On `CENTRAL_LISTEN` a scrape must carry `CENTRAL_METRICS_TOKEN` (or the admin
//! token), since the text names every monitor, poller and region; `CENTRAL_METRICS_LISTEN` is
//! meant to be private and asks for nothing. However many scrape, the text is worked out at
//! most once every `RENDER_EVERY` (it reads every monitor's stored status): scrapers that
//! arrive together wait for one rendering, and later ones within the period get the same text.
//! A scraper that comes at a steady interval (`cadence`) finds its text rendered just before it
//! comes (`render_ahead`, run by `duties`), still within `RENDER_EVERY`, instead of waiting for
//! it.
//!
//! Cost: one rendering per `RENDER_EVERY` at most, which reads each monitor's and location's
//! stored status and latency once (`store::gauges`: no status is derived here), and the
//! pollers; O(1) per scrape besides. Rendering ahead moves a scrape's rendering earlier, never
//! sooner than `RENDER_EVERY` after the last; it adds one when an expected scrape does not
//! come (or two scrapers' intervals agree by chance). Must not: derive statuses, render per
//! request, or keep the token itself.

mod cadence;

use std::sync::PoisonError;
use std::time::Duration;

use axum::body::Bytes;
use tokio::sync::{watch, Mutex};
use tokio::time::Instant;

use super::{admin_token, auth, App};
use crate::metrics::{MonitorSample, PollerSample, StateParts, StateText};
use crate::service::error::ServiceResult;
use crate::store::Shown;
use crate::telemetry::error_chain;
use cadence::Cadence;

/// The longest a scrape's text may be old; below Prometheus' usual 15 s interval.
pub const RENDER_EVERY: Duration = Duration::from_secs(5);

/// How long before an expected scrape its text is rendered, at most; well within
/// `RENDER_EVERY`, so that the text is still fresh when the scrape comes.
const MOST_LEAD: Duration = Duration::from_millis(2_500);

/// What the lead adds to twice the last rendering's time: room for the scrape to arrive
/// early (a busy scraper or network, or a late arrival before it shortening the guess).
const LEAD_MARGIN: Duration = Duration::from_secs(1);

pub struct Scrape {
    token_sha256: Option<String>,
    /// The state gauges as last rendered, shared by every scrape until `RENDER_EVERY` passed.
    rendered: Mutex<Rendered>,
    /// When the scrapes arrive.
    cadence: std::sync::Mutex<Cadence>,
    /// The rendering ahead of the next expected scrape, for `render_ahead`'s duty.
    ahead: watch::Sender<Option<Ahead>>,
}

/// A rendering to make ahead of an expected scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ahead {
    /// When to render.
    pub render_at: Instant,
    /// When the scrape is expected.
    pub expected: Instant,
}

#[derive(Default)]
struct Rendered {
    /// When the rendering of `parts` started (the snapshot it read); `None` before the first.
    at: Option<Instant>,
    /// How long that rendering took: how far ahead the next is started.
    took: Duration,
    /// `StateParts` as shared bytes: each scrape sends them as they are, none copies them.
    parts: Vec<Bytes>,
    /// The monitor families' lengths at the last rendering that read them, which the next
    /// reserves (`StateText::new`).
    family_lens: [usize; 3],
}

impl Rendered {
    /// Whether the text may still be served at `at`.
    fn fresh_at(&self, at: Instant) -> bool {
        self.at.is_some_and(|rendered| at < rendered + RENDER_EVERY)
    }
}

/// Why the state was rendered (`central_state_renderings_total`'s `reason`).
#[derive(Debug, Clone, Copy)]
enum Reason {
    /// A scrape found no fresh text and waited for this one.
    Asked,
    /// Ahead of an expected scrape.
    Ahead,
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
            cadence: std::sync::Mutex::default(),
            ahead: watch::Sender::new(None),
        })
    }
}

impl App {
    /// The renderings ahead, as scrapes ask for them (`duties::metrics_ahead`).
    pub fn scrape_ahead(&self) -> watch::Receiver<Option<Ahead>> {
        self.scrape.ahead.subscribe()
    }

    /// Marks `done` made, unless a scrape asked for another meanwhile.
    pub fn scrape_ahead_done(&self, done: Ahead) {
        self.scrape.ahead.send_if_modified(|ahead| {
            let same = *ahead == Some(done);
            if same {
                *ahead = None;
            }
            same
        });
    }

    /// Whether `token` is `CENTRAL_METRICS_TOKEN` (memory only: a high-entropy secret from the
    /// environment, so one SHA-256 is enough).
    pub fn is_metrics_token(&self, token: &str) -> bool {
        self.scrape
            .token_sha256
            .as_deref()
            .is_some_and(|hash| auth::constant_time_eq(&auth::sha256_hex(token), hash))
    }

    /// Whether `token` may read `/metrics` on the public listener.
    pub async fn may_scrape(&self, token: &str) -> ServiceResult<bool> {
        Ok(self.is_metrics_token(token) || self.verify_admin_token(token).await?)
    }

    /// The state gauges of every monitor, location and poller (OpenMetrics text without its
    /// `# EOF`, identical in the older text format: gauges only), as parts to be sent in
    /// order, rendered at most once every `RENDER_EVERY`; a scrape gets the shared bytes, not
    /// a copy. If the state cannot be read the scrape gets none (and the counters still).
    /// When the scrapes come at a steady interval and the text will be too old for the next
    /// one, asks for a rendering just before it (`render_ahead`). Ends with the text's age for
    /// this scrape (`central_state_age_seconds`).
    pub async fn metrics_state(&self) -> Vec<Bytes> {
        let expected = self
            .scrape
            .cadence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .scraped(Instant::now());
        let mut rendered = self.scrape.rendered.lock().await;
        if !rendered.fresh_at(Instant::now()) {
            self.render_state(&mut rendered, Reason::Asked).await;
        }
        if let (Some(expected), Some(at)) = (expected, rendered.at) {
            // Early enough for the scrape's arrival to vary by a second (the guess takes the
            // last interval, so a late arrival counts twice), never sooner than `RENDER_EVERY`
            // after the last rendering: renderings stay at most one per `RENDER_EVERY`.
            let lead = (rendered.took * 2 + LEAD_MARGIN).min(MOST_LEAD);
            let render_at = (expected - lead).max(at + RENDER_EVERY);
            if render_at < expected {
                self.scrape.ahead.send_replace(Some(Ahead {
                    render_at,
                    expected,
                }));
            }
        }
        let mut parts = rendered.parts.clone();
        if let Some(at) = rendered.at.filter(|_| !parts.is_empty()) {
            parts.push(Bytes::from(crate::metrics::state_age_text(at.elapsed())));
        }
        parts
    }

    /// Renders the state ahead of a scrape expected at `expected`, unless the text will still
    /// be fresh then (another scrape had it rendered meanwhile).
    pub async fn render_ahead(&self, expected: Instant) {
        let mut rendered = self.scrape.rendered.lock().await;
        if !rendered.fresh_at(expected) {
            self.render_state(&mut rendered, Reason::Ahead).await;
        }
    }

    /// Renders the state into `rendered`; on an error, logs it and keeps no text.
    async fn render_state(&self, rendered: &mut Rendered, reason: Reason) {
        let started = Instant::now();
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
        // From the start: the rows were read in a snapshot taken then.
        rendered.at = Some(started);
        rendered.took = started.elapsed();
        let reason = match reason {
            Reason::Asked => "asked",
            Reason::Ahead => "ahead",
        };
        self.metrics
            .state_renderings
            .get_or_create(&vec![("reason", reason)])
            .inc();
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
    async fn state_metrics(&self, family_lens: [usize; 3]) -> ServiceResult<StateParts> {
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
                status: self.poller_status(p, now).as_str(),
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
