//! Central's Prometheus metrics: the process counters, and the text formats they are served
//! in. The state gauges of monitors and pollers are `state`.

mod state;

pub use state::{MonitorSample, PollerSample, StateParts, StateText};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of a family: fixed names and values chosen by central, never by a client.
pub type FixedLabels = Vec<(&'static str, &'static str)>;

pub struct Metrics {
    registry: Registry,
    /// Connections closed as soon as accepted, by `cap`.
    pub connections_refused: Family<FixedLabels, Counter>,
    /// Requests answered 503 because their pool was full, by `pool`.
    pub requests_shed: Family<FixedLabels, Counter>,
    /// Requests answered 408 at `CENTRAL_REQUEST_TIMEOUT`.
    pub requests_timed_out: Counter,
    pub results_accepted: Counter,
    pub results_duplicate: Counter,
    pub results_rejected: Counter,
    pub registrations: Counter,
    pub notifications_delivered: Counter,
    pub notification_attempts_failed: Counter,
    /// On SQLite, the results stored and not yet flushed into `result_index` (the results
    /// head's size, `store::head`), set as each scrape renders; 0 on PostgreSQL.
    pub results_head_rows: Gauge,
    /// Renderings of the state gauges, by `reason`: `asked` (a scrape waited for it) or
    /// `ahead` (made just before a steady scraper's next scrape, `service::scrape`).
    pub state_renderings: Family<FixedLabels, Counter>,
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
        let connections_refused = Family::<FixedLabels, Counter>::default();
        let requests_shed = Family::<FixedLabels, Counter>::default();
        let requests_timed_out = Counter::default();
        let results_head_rows = Gauge::default();
        let state_renderings = Family::<FixedLabels, Counter>::default();
        registry.register(
            "connections_refused",
            "Connections closed as soon as they were accepted, by the cap reached (total: \
             CENTRAL_MAX_CONNECTIONS, per_client: CENTRAL_MAX_CONNECTIONS_PER_CLIENT)",
            connections_refused.clone(),
        );
        registry.register(
            "requests_shed",
            "Requests answered 503 because their pool was full, by pool (poller, refresh, \
             operator, ping, public, unauthenticated)",
            requests_shed.clone(),
        );
        registry.register(
            "requests_timed_out",
            "Requests answered 408 because they were not done within CENTRAL_REQUEST_TIMEOUT",
            requests_timed_out.clone(),
        );
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
            "results_head_rows",
            "SQLite: results stored and not yet in the per-monitor index (the results head, \
             flushed every 5 minutes or at 1,000,000 results); 0 on PostgreSQL",
            results_head_rows.clone(),
        );
        registry.register(
            "state_renderings",
            "Renderings of the monitor, location and poller state gauges, by reason (asked: a \
             scrape waited for it; ahead: rendered just before a steady scraper's next scrape)",
            state_renderings.clone(),
        );
        registry.register(
            "poller_registrations",
            "Pollers registered",
            registrations.clone(),
        );
        Metrics {
            registry,
            connections_refused,
            requests_shed,
            requests_timed_out,
            results_accepted,
            results_duplicate,
            results_rejected,
            registrations,
            notifications_delivered,
            notification_attempts_failed,
            results_head_rows,
            state_renderings,
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

/// `central_state_age_seconds` for one scrape: how old the state gauges it carries are, from
/// the start of their rendering (the snapshot they were read in). Written per scrape, not kept
/// in the registry: two scrapes served at once carry different texts' ages. The same text in
/// both formats (a gauge).
pub fn state_age_text(age: std::time::Duration) -> String {
    format!(
        "# HELP central_state_age_seconds How old the state gauges in this scrape are (under \
         5 s), from the start of their rendering.\n\
         # TYPE central_state_age_seconds gauge\n\
         central_state_age_seconds {:.3}\n",
        age.as_secs_f64()
    )
}

/// OpenMetrics text (all prometheus-client writes) as the Prometheus text format 0.0.4, for
/// scrapers and tools that read only that (`promtool check metrics`, `curl`): a counter's
/// family is named after its `_total` samples, and the `# UNIT` and `# EOF` lines go. Label
/// values are escaped the same way in both formats. Written here because the crate has no
/// encoder for the older format.
pub fn to_text_format(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut text = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        text.push_str(renamed.as_deref().unwrap_or(line));
        text.push('\n');
    }
    text
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_names_counters_after_their_samples() {
        let metrics = Metrics::new();
        metrics.results_accepted.inc_by(3);
        let text = to_text_format(&metrics.render());
        assert!(
            text.contains("# TYPE central_results_accepted_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP central_results_accepted_total "),
            "{text}"
        );
        assert!(
            text.contains("\ncentral_results_accepted_total 3\n"),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
    }
}
