//! Central's Prometheus metrics.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

pub struct Metrics {
    registry: Registry,
    pub results_accepted: Counter,
    pub results_duplicate: Counter,
    pub results_rejected: Counter,
    pub registrations: Counter,
    pub notifications_delivered: Counter,
    pub notification_attempts_failed: Counter,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("central");
        let results_accepted = Counter::default();
        let results_duplicate = Counter::default();
        let results_rejected = Counter::default();
        let registrations = Counter::default();
        let notifications_delivered = Counter::default();
        let notification_attempts_failed = Counter::default();
        registry.register(
            "notifications_delivered",
            "Notifications a receiver accepted",
            notifications_delivered.clone(),
        );
        registry.register(
            "notification_attempts_failed",
            "Delivery attempts that failed (each is retried until a day has passed)",
            notification_attempts_failed.clone(),
        );
        registry.register(
            "results_accepted",
            "Results stored",
            results_accepted.clone(),
        );
        registry.register(
            "results_duplicate",
            "Results uploaded again and recognised as already stored",
            results_duplicate.clone(),
        );
        registry.register(
            "results_rejected",
            "Results refused (malformed or not owned)",
            results_rejected.clone(),
        );
        registry.register(
            "poller_registrations",
            "Pollers registered",
            registrations.clone(),
        );
        Metrics {
            registry,
            results_accepted,
            results_duplicate,
            results_rejected,
            registrations,
            notifications_delivered,
            notification_attempts_failed,
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// One monitor (or one location of it) as the state gauges show it.
pub struct MonitorSample<'a> {
    pub monitor_id: &'a str,
    pub name: &'a str,
    /// Empty for the monitor as a whole; a region for one of its locations.
    pub region: &'a str,
    pub status: &'a str,
    /// 1 up, 0 down or degraded; `None` when nobody knows (pending, stale, paused, unknown).
    pub up: Option<i64>,
    pub latency_ms: Option<i64>,
}

/// One poller as the state gauges show it.
pub struct PollerSample<'a> {
    pub poller_id: &'a str,
    pub name: &'a str,
    pub region: &'a str,
    pub status: &'a str,
    pub queue_depth: i64,
}

type Labels = Vec<(&'static str, String)>;

/// Gauges of what central knows now: one series per monitor, per location and per poller
/// (so cardinality follows the number of objects, never the number of results).
pub fn render_state(monitors: &[MonitorSample<'_>], pollers: &[PollerSample<'_>]) -> String {
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;

    let mut registry = Registry::with_prefix("central");
    let up = Family::<Labels, Gauge>::default();
    let state = Family::<Labels, Gauge>::default();
    let poller_state = Family::<Labels, Gauge>::default();
    let latency = Family::<Labels, Gauge>::default();
    let poller_up = Family::<Labels, Gauge>::default();
    let queue = Family::<Labels, Gauge>::default();
    for m in monitors {
        let labels: Labels = vec![
            ("monitor_id", m.monitor_id.to_string()),
            ("name", m.name.to_string()),
            ("region", m.region.to_string()),
        ];
        if let Some(value) = m.up {
            up.get_or_create(&labels).set(value);
        }
        if let Some(ms) = m.latency_ms {
            latency.get_or_create(&labels).set(ms);
        }
        let mut with_status = labels.clone();
        with_status.push(("status", m.status.to_string()));
        state.get_or_create(&with_status).set(1);
    }
    for p in pollers {
        let labels: Labels = vec![
            ("poller_id", p.poller_id.to_string()),
            ("name", p.name.to_string()),
            ("region", p.region.to_string()),
        ];
        poller_up
            .get_or_create(&labels)
            .set(i64::from(p.status != "offline"));
        queue.get_or_create(&labels).set(p.queue_depth);
        let mut with_status = labels.clone();
        with_status.push(("status", p.status.to_string()));
        poller_state.get_or_create(&with_status).set(1);
    }
    registry.register(
        "monitor_up",
        "1 when the monitor (region empty) or one of its locations is up, 0 when down or degraded; absent when unknown",
        up,
    );
    registry.register(
        "monitor_latency_ms",
        "Latency of the newest result, per monitor and per location",
        latency,
    );
    registry.register(
        "monitor_state",
        "1 for the current status (label) of each monitor and location",
        state,
    );
    registry.register(
        "poller_state",
        "1 for the current status (label) of each poller",
        poller_state,
    );
    registry.register("poller_up", "1 unless the poller is offline", poller_up);
    registry.register(
        "poller_queue_depth",
        "Results queued on the poller, as of its last heartbeat",
        queue,
    );
    let mut text = String::new();
    let _ = encode(&mut text, &registry);
    text
}
