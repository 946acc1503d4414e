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
