//! The state gauges of `/metrics`: a series per monitor, per location and per poller, as
//! text. Monitors' series are written as their rows are read (`StateText::add`), so a scrape
//! holds the text, not the rows. Must not: read the store or decide a status (that is
//! `service::scrape` and `service::alerts`).
//!
//! The monitor families are written here by hand, not with prometheus-client: its encoder
//! takes a family's samples in one call, so the text could only be written once every row
//! had been read and kept. The text format of a gauge is one line per series; label values
//! are escaped here (`escape_into`), for these families and the pollers' alike.

use std::fmt::Write;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// One monitor (or one location of it) as the state gauges show it: its stored row.
#[derive(Debug, Clone, Copy)]
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

/// The monitor families being written, one buffer each (a family's series must stand
/// together in the text): `add` a sample at a time, then `finish`.
pub struct StateText {
    /// `FAMILIES`' texts, each opened by its `# HELP` and `# TYPE` lines.
    families: [String; 3],
    /// The sample being added's labels, escaped once for its three series.
    labels: String,
}

/// The state gauges as parts to be sent one after the other: the pollers' families, then
/// the monitors'. Kept apart, not copied into one text: at 100,000 monitors the monitors'
/// families are some 20 MB.
pub struct StateParts(pub [String; 4]);

impl StateParts {
    /// Each monitor family's length, for the next rendering to reserve (`StateText::new`).
    pub fn family_lens(&self) -> [usize; 3] {
        let [_, up, latency, state] = &self.0;
        [up.len(), latency.len(), state.len()]
    }
}

const FAMILIES: [(&str, &str); 3] = [
    (
        "central_monitor_up",
        "1 when the monitor (region empty) or one of its locations is up, 0 when down or degraded; absent when unknown.",
    ),
    (
        "central_monitor_latency_ms",
        "Latency of the newest result, per monitor and per location.",
    ),
    (
        "central_monitor_state",
        "1 for the current status (label) of each monitor and location.",
    ),
];

impl StateText {
    /// `capacity`: each family's length at the last rendering (`StateParts::family_lens`),
    /// reserved at once with a sixteenth to spare (monitors added since) rather than grown by
    /// doubling and copying some 20 MB; zeros at first.
    pub fn new(capacity: [usize; 3]) -> StateText {
        let families = std::array::from_fn(|i| {
            let (name, help) = FAMILIES[i];
            let mut text = String::with_capacity(capacity[i] + capacity[i] / 16);
            let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} gauge\n");
            text
        });
        StateText {
            families,
            labels: String::new(),
        }
    }

    pub fn add(&mut self, m: &MonitorSample<'_>) {
        let labels = &mut self.labels;
        labels.clear();
        labels.push_str("{monitor_id=\"");
        escape_into(labels, m.monitor_id);
        labels.push_str("\",name=\"");
        escape_into(labels, m.name);
        labels.push_str("\",region=\"");
        escape_into(labels, m.region);
        let [up, latency, state] = &mut self.families;
        if let Some(value) = m.up {
            series(up, FAMILIES[0].0, labels, None, value);
        }
        if let Some(ms) = m.latency_ms {
            series(latency, FAMILIES[1].0, labels, None, ms);
        }
        series(state, FAMILIES[2].0, labels, Some(m.status), 1);
    }

    /// The whole text as its parts: the pollers' families, then the monitors' (OpenMetrics
    /// text without its `# EOF`, identical in the older text format: gauges only).
    /// A family that grew past its reserve by doubling is shrunk to its text: the parts are
    /// kept for `RENDER_EVERY` and by every response that sends them.
    pub fn finish(self, pollers: &[PollerSample<'_>]) -> StateParts {
        let [up, latency, state] = self.families.map(|mut text| {
            if text.capacity() > text.len() + text.len() / 8 {
                text.shrink_to_fit();
            }
            text
        });
        StateParts([poller_text(pollers), up, latency, state])
    }
}

/// `name{monitor_id="…",name="…",region="…"[,status="…"]} value`, from `labels` already
/// written up to the region's value.
fn series(out: &mut String, name: &str, labels: &str, status: Option<&str>, value: i64) {
    out.push_str(name);
    out.push_str(labels);
    if let Some(status) = status {
        out.push_str("\",status=\"");
        escape_into(out, status);
    }
    out.push_str("\"} ");
    out.push_str(itoa::Buffer::new().format(value));
    out.push('\n');
}

/// A label value as the text format must carry it: `\\`, `"` and a line feed escaped. The
/// values are operators' and pollers' names: a quote and a newline in one must not end the
/// label, nor start a forged series (prometheus-client writes values as they are).
fn escape_into(out: &mut impl Write, value: &str) {
    // Nearly every value (ids, names, regions, statuses) has nothing to escape: found so by
    // one vectorised search and written whole, not a character at a time.
    if memchr::memchr3(b'\\', b'"', b'\n', value.as_bytes()).is_none() {
        let _ = out.write_str(value);
        return;
    }
    for c in value.chars() {
        let _ = match c {
            '\\' => out.write_str("\\\\"),
            '"' => out.write_str("\\\""),
            '\n' => out.write_str("\\n"),
            c => out.write_char(c),
        };
    }
}

/// A label value `escape_into` writes, for the pollers' families (few: prometheus-client's).
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
        escape_into(encoder, &self.0);
        Ok(())
    }
}

type Labels = Vec<(&'static str, Escaped)>;

/// The pollers' gauges (one series per poller), as prometheus-client writes them.
fn poller_text(pollers: &[PollerSample<'_>]) -> String {
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
    text.truncate(text.trim_end().trim_end_matches("# EOF").len());
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(monitors: &[MonitorSample<'_>], pollers: &[PollerSample<'_>]) -> String {
        let mut text = StateText::new([0; 3]);
        monitors.iter().for_each(|m| text.add(m));
        text.finish(pollers).0.concat()
    }

    /// A name that closes its label and starts a series of its own stays one label value.
    #[test]
    fn names_cannot_end_their_label_or_forge_a_series() {
        let name = "x\"} 1\ncentral_monitor_up{monitor_id=\"forged\"} 1\n# EOF\\";
        let monitors = [MonitorSample {
            monitor_id: "m1",
            name,
            region: "",
            status: "up",
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
        let text = render(&monitors, &pollers);
        assert!(!text.contains("monitor_id=\"forged\"} 1\n"), "{text}");
        let escaped = r#"name="x\"} 1\ncentral_monitor_up{monitor_id=\"forged\"} 1\n# EOF\\""#;
        for series in [
            format!("central_monitor_up{{monitor_id=\"m1\",{escaped},region=\"\"}} 1"),
            format!("central_poller_up{{poller_id=\"p1\",{escaped},region=\"eu\"}} 1"),
        ] {
            assert!(text.contains(&series), "{series} in {text}");
        }
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("central_monitor_up"))
            .collect();
        assert_eq!(series.len(), 1, "{text}");
        assert!(!text.contains("# EOF\n"), "{text}");
    }

    /// Each family's series stand together under its own `# TYPE`, whatever order the
    /// samples came in, and a family has no series for what nobody knows.
    #[test]
    fn each_family_holds_its_own_series() {
        let sample = |id, region, status, up, latency_ms| MonitorSample {
            monitor_id: id,
            name: "n",
            region,
            status,
            up,
            latency_ms,
        };
        let monitors = [
            sample("a", "", "up", Some(1), Some(12)),
            sample("a", "eu", "down", Some(0), None),
            sample("b", "", "pending", None, None),
        ];
        let text = render(&monitors, &[]);
        // The process counters follow: the last series ends its line.
        assert!(text.ends_with("} 1\n"), "{text}");
        let mut family = "";
        let mut seen = Vec::new();
        for line in text.lines() {
            if let Some(name) = line.strip_prefix("# TYPE ") {
                family = name.trim_end_matches(" gauge");
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            assert!(
                line.starts_with(&format!("{family}{{")),
                "{line} under {family}"
            );
            seen.push(line);
        }
        assert_eq!(
            seen,
            [
                "central_monitor_up{monitor_id=\"a\",name=\"n\",region=\"\"} 1",
                "central_monitor_up{monitor_id=\"a\",name=\"n\",region=\"eu\"} 0",
                "central_monitor_latency_ms{monitor_id=\"a\",name=\"n\",region=\"\"} 12",
                "central_monitor_state{monitor_id=\"a\",name=\"n\",region=\"\",status=\"up\"} 1",
                "central_monitor_state{monitor_id=\"a\",name=\"n\",region=\"eu\",status=\"down\"} 1",
                "central_monitor_state{monitor_id=\"b\",name=\"n\",region=\"\",status=\"pending\"} 1",
            ]
        );
    }

    /// The whole text, exactly: the pollers' families, then the monitors' in their order,
    /// each opened by its `# HELP` and `# TYPE` even when it has no series, whatever was
    /// reserved; and the parts are the families as they are sent, in that order.
    #[test]
    fn the_text_is_the_families_in_order_each_with_its_header() {
        let monitors = [
            MonitorSample {
                monitor_id: "a",
                name: "web",
                region: "",
                status: "up",
                up: Some(1),
                latency_ms: None,
            },
            MonitorSample {
                monitor_id: "b",
                name: "db",
                region: "",
                status: "pending",
                up: None,
                latency_ms: None,
            },
        ];
        let pollers = [PollerSample {
            poller_id: "p1",
            name: "edge",
            region: "eu",
            status: "online",
            queue_depth: 3,
        }];
        let mut text = StateText::new([1_000, 0, 5]);
        monitors.iter().for_each(|m| text.add(m));
        let parts = text.finish(&pollers).0;
        let expected = [
            "# HELP central_poller_state 1 for the current status (label) of each poller.\n\
             # TYPE central_poller_state gauge\n\
             central_poller_state{poller_id=\"p1\",name=\"edge\",region=\"eu\",status=\"online\"} 1\n\
             # HELP central_poller_up 1 unless the poller is offline.\n\
             # TYPE central_poller_up gauge\n\
             central_poller_up{poller_id=\"p1\",name=\"edge\",region=\"eu\"} 1\n\
             # HELP central_poller_queue_depth Results queued on the poller, as of its last heartbeat.\n\
             # TYPE central_poller_queue_depth gauge\n\
             central_poller_queue_depth{poller_id=\"p1\",name=\"edge\",region=\"eu\"} 3\n",
            "# HELP central_monitor_up 1 when the monitor (region empty) or one of its locations is up, 0 when down or degraded; absent when unknown.\n\
             # TYPE central_monitor_up gauge\n\
             central_monitor_up{monitor_id=\"a\",name=\"web\",region=\"\"} 1\n",
            "# HELP central_monitor_latency_ms Latency of the newest result, per monitor and per location.\n\
             # TYPE central_monitor_latency_ms gauge\n",
            "# HELP central_monitor_state 1 for the current status (label) of each monitor and location.\n\
             # TYPE central_monitor_state gauge\n\
             central_monitor_state{monitor_id=\"a\",name=\"web\",region=\"\",status=\"up\"} 1\n\
             central_monitor_state{monitor_id=\"b\",name=\"db\",region=\"\",status=\"pending\"} 1\n",
        ];
        assert_eq!(parts, expected);
        // 1,000 bytes reserved for a family of 200: not kept for the text's lifetime.
        assert!(
            parts[1].capacity() <= parts[1].len() * 9 / 8,
            "{}",
            parts[1].capacity()
        );
    }
}
