//! Central's Prometheus metrics.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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
        registry.register(
            "connections_refused",
            "Connections closed as soon as they were accepted, by the cap reached (total: \
             CENTRAL_MAX_CONNECTIONS, per_client: CENTRAL_MAX_CONNECTIONS_PER_CLIENT)",
            connections_refused.clone(),
        );
        registry.register(
            "requests_shed",
            "Requests answered 503 because their pool was full, by pool (poller, operator, \
             unauthenticated)",
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

/// One monitor (or one location of it) as the state gauges show it: its stored row.
#[derive(Debug, Clone)]
pub struct MonitorSample {
    pub monitor_id: String,
    pub name: String,
    /// Empty for the monitor as a whole; a region for one of its locations.
    pub region: String,
    pub status: String,
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

/// A label value as the text format must carry it: `\\`, `"` and a line feed escaped. The
/// values are operators' and pollers' names: a quote and a newline in one must not end the
/// label, nor start a forged series (prometheus-client writes values as they are).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Escaped(String);

impl From<&str> for Escaped {
    fn from(value: &str) -> Self {
        Escaped(value.to_string())
    }
}

impl prometheus_client::encoding::EncodeLabelValue for Escaped {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder,
    ) -> Result<(), std::fmt::Error> {
        EscapedRef(&self.0).encode(encoder)
    }
}

type Labels = Vec<(&'static str, Escaped)>;

/// `Escaped` without a copy of the value, for the series written straight from their rows.
#[derive(Debug, Clone, Copy)]
struct EscapedRef<'a>(&'a str);

impl prometheus_client::encoding::EncodeLabelValue for EscapedRef<'_> {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder,
    ) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        // Nearly every value (ids, names, regions, statuses) has nothing to escape: written
        // whole, not a character at a time (a fifth of a 100,000-monitor rendering).
        if !self.0.contains(['\\', '"', '\n']) {
            return encoder.write_str(self.0);
        }
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// The monitor and location gauges, written series by series from the stored rows: a family
/// of label sets built first would be three hashed maps of 100,000 entries at that many
/// monitors.
#[derive(Debug)]
struct MonitorGauges(Vec<MonitorSample>);

impl MonitorGauges {
    fn labels(m: &MonitorSample) -> [(&'static str, EscapedRef<'_>); 3] {
        [
            ("monitor_id", EscapedRef(&m.monitor_id)),
            ("name", EscapedRef(&m.name)),
            ("region", EscapedRef(&m.region)),
        ]
    }
}

impl prometheus_client::collector::Collector for MonitorGauges {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::metrics::MetricType;
        let mut family = encoder.encode_descriptor(
            "monitor_up",
            "1 when the monitor (region empty) or one of its locations is up, 0 when down or degraded; absent when unknown",
            None,
            MetricType::Gauge,
        )?;
        for m in &self.0 {
            if let Some(up) = m.up {
                family.encode_family(&Self::labels(m))?.encode_gauge(&up)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "monitor_latency_ms",
            "Latency of the newest result, per monitor and per location",
            None,
            MetricType::Gauge,
        )?;
        for m in &self.0 {
            if let Some(ms) = m.latency_ms {
                family.encode_family(&Self::labels(m))?.encode_gauge(&ms)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "monitor_state",
            "1 for the current status (label) of each monitor and location",
            None,
            MetricType::Gauge,
        )?;
        for m in &self.0 {
            let [id, name, region] = Self::labels(m);
            let labels = [id, name, region, ("status", EscapedRef(&m.status))];
            family.encode_family(&labels)?.encode_gauge(&1i64)?;
        }
        Ok(())
    }
}

/// Gauges of what central knows now: one series per monitor, per location and per poller
/// (so cardinality follows the number of objects, never the number of results).
pub fn render_state(monitors: Vec<MonitorSample>, pollers: &[PollerSample<'_>]) -> String {
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;

    let mut registry = Registry::with_prefix("central");
    let poller_state = Family::<Labels, Gauge>::default();
    let poller_up = Family::<Labels, Gauge>::default();
    let queue = Family::<Labels, Gauge>::default();
    for p in pollers {
        let labels: Labels = vec![
            ("poller_id", p.poller_id.into()),
            ("name", p.name.into()),
            ("region", p.region.into()),
        ];
        poller_up
            .get_or_create(&labels)
            .set(i64::from(p.status != "offline"));
        queue.get_or_create(&labels).set(p.queue_depth);
        let mut with_status = labels.clone();
        with_status.push(("status", p.status.into()));
        poller_state.get_or_create(&with_status).set(1);
    }
    registry.register_collector(Box::new(MonitorGauges(monitors)));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A name that closes its label and starts a series of its own stays one label value.
    #[test]
    fn names_cannot_end_their_label_or_forge_a_series() {
        let name = "x\"} 1\ncentral_monitor_up{monitor_id=\"forged\"} 1\n# EOF\\";
        let monitors = vec![MonitorSample {
            monitor_id: "m1".into(),
            name: name.into(),
            region: String::new(),
            status: "up".into(),
            up: Some(1),
            latency_ms: None,
        }];
        let pollers = [PollerSample {
            poller_id: "p1",
            name,
            region: "eu",
            status: "online",
            queue_depth: 0,
        }];
        let text = render_state(monitors, &pollers);
        assert!(!text.contains("monitor_id=\"forged\"} 1\n"), "{text}");
        let escaped = r#"name="x\"} 1\ncentral_monitor_up{monitor_id=\"forged\"} 1\n# EOF\\""#;
        assert!(
            text.contains(&format!(
                "central_monitor_up{{monitor_id=\"m1\",{escaped},region=\"\"}} 1"
            )),
            "{text}"
        );
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("central_monitor_up"))
            .collect();
        assert_eq!(series.len(), 1, "{text}");
    }

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
