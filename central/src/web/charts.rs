//! Charts drawn on the server as inline SVG: the heartbeat bar of recent results and the
//! latency chart of history buckets. No script draws anything, so they show with JavaScript off.

use std::fmt::Write;

use maud::{html, Markup};
use shared_proto::history::HistoryBucket;

use super::layout::trusted;
use crate::store::{ResultRow, ResultStatus};

/// One bar per result, oldest on the left, coloured by status. The bars of one status are one
/// `<path>`, and one title sums them up naming when each result that was not `up` came: a list
/// of 50 monitors carries 2,500 bars, and a rect with its own title each weighed 330 kB per
/// page. Each result's own detail is on the monitor's page.
pub fn heartbeat_bar(beats_newest_first: &[ResultRow], slots: usize) -> Markup {
    const BAR: usize = 6;
    const GAP: usize = 2;
    const NAMED: usize = 5;
    let width = slots * (BAR + GAP);
    let shown = &beats_newest_first[..beats_newest_first.len().min(slots)];
    let empty = slots - shown.len();
    let mut paths: Vec<(&str, String)> = Vec::new();
    let slot_statuses =
        std::iter::repeat_n("", empty).chain(shown.iter().rev().map(|b| b.status.as_str()));
    for (slot, status) in slot_statuses.enumerate() {
        let d = match paths.iter_mut().find(|(s, _)| *s == status) {
            Some((_, d)) => d,
            None => {
                paths.push((status, String::new()));
                &mut paths.last_mut().expect("just pushed").1
            }
        };
        let _ = write!(d, "M{} 0h{BAR}v20h-{BAR}z", slot * (BAR + GAP));
    }
    let up = shown
        .iter()
        .filter(|b| b.status == ResultStatus::Up)
        .count();
    let mut label = format!("last {} results: {up} up", shown.len());
    let not_up: Vec<&ResultRow> = shown
        .iter()
        .filter(|b| b.status != ResultStatus::Up)
        .collect();
    if !not_up.is_empty() {
        let named: Vec<String> = not_up
            .iter()
            .take(NAMED)
            .map(|b| {
                let when = crate::service::time_of(b.ts).format("%Y-%m-%d %H:%M:%S");
                format!("{} at {when}", b.status.as_str())
            })
            .collect();
        let more = not_up.len().saturating_sub(NAMED);
        let _ = write!(
            label,
            ", {} not up (newest: {}",
            not_up.len(),
            named.join(", ")
        );
        if more > 0 {
            let _ = write!(label, " and {more} more");
        }
        label.push(')');
    }
    let label = escape(&label);
    let mut svg = format!(
        r#"<svg class="beats" viewBox="0 0 {width} 20" width="{width}" height="20" role="img" aria-label="{label}"><title>{label}</title>"#
    );
    for (status, d) in &paths {
        let class = if status.is_empty() {
            "beat".to_string()
        } else {
            format!("beat beat-{}", escape(status))
        };
        let _ = write!(svg, r#"<path class="{class}" d="{d}"/>"#);
    }
    svg.push_str("</svg>");
    html! { (trusted(svg)) }
}

/// Mean latency per bucket as a line, min–max as a band, buckets with failures marked red
/// under the axis. Empty history gets a sentence instead of an empty frame.
pub fn latency_chart(buckets: &[HistoryBucket], title: &str) -> Markup {
    if buckets.is_empty() {
        return html! { p.muted { "No results in this range yet." } };
    }
    const W: f64 = 720.0;
    const H: f64 = 180.0;
    const PAD: f64 = 28.0;
    let top = buckets
        .iter()
        .filter_map(|b| b.latency_ms_max)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let first = buckets[0].start.timestamp_millis() as f64;
    let last = buckets[buckets.len() - 1].start.timestamp_millis() as f64;
    let span = (last - first).max(1.0);
    let x = |b: &HistoryBucket| {
        PAD + (b.start.timestamp_millis() as f64 - first) / span * (W - 2.0 * PAD)
    };
    let y = |ms: f64| H - PAD - ms / top * (H - 2.0 * PAD);
    let mut svg = format!(
        r#"<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{title}">"#,
        title = escape(title)
    );
    let _ = write!(
        svg,
        r#"<line class="axis" x1="{PAD}" y1="{b}" x2="{r}" y2="{b}"/><text x="2" y="{t}" class="tick">{top} ms</text><text x="2" y="{b}" class="tick">0</text>"#,
        b = H - PAD,
        r = W - PAD,
        t = PAD,
        top = top as u64
    );
    let band: Vec<String> = buckets
        .iter()
        .filter_map(|b| Some((x(b), y(b.latency_ms_max? as f64))))
        .chain(
            buckets
                .iter()
                .rev()
                .filter_map(|b| Some((x(b), y(b.latency_ms_min? as f64)))),
        )
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    if !band.is_empty() {
        let _ = write!(
            svg,
            r#"<polygon class="band" points="{}"/>"#,
            band.join(" ")
        );
    }
    let line: Vec<String> = buckets
        .iter()
        .filter_map(|b| Some(format!("{:.1},{:.1}", x(b), y(b.latency_ms_mean?))))
        .collect();
    let _ = write!(
        svg,
        r#"<polyline class="mean" points="{}"/>"#,
        line.join(" ")
    );
    for bucket in buckets.iter().filter(|b| b.down > 0) {
        let _ = write!(
            svg,
            r#"<rect class="down-mark" x="{:.1}" y="{}" width="3" height="6"><title>{}: {} down of {}</title></rect>"#,
            x(bucket) - 1.5,
            H - PAD + 4.0,
            bucket
                .start
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            bucket.down,
            bucket.up + bucket.down
        );
    }
    svg.push_str("</svg>");
    html! { (trusted(svg)) }
}

/// Text for SVG content and attributes (targets' messages are untrusted).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let _ = maud::Escaper::new(&mut out).write_str(text);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(status: &str, ts: i64, msg: &str) -> ResultRow {
        ResultRow {
            id: "r".into(),
            monitor_id: "m".into(),
            poller_id: "p".into(),
            region: None,
            ts,
            status: ResultStatus::parse(status).unwrap(),
            latency_ms: None,
            msg: msg.into(),
            meta: "{}".into(),
        }
    }

    #[test]
    fn each_result_is_one_bar_in_its_status_path_oldest_on_the_left() {
        let newest_first = [
            beat("up", 3_000, ""),
            beat("down", 2_000, ""),
            beat("up", 1_000, ""),
        ];
        let svg = heartbeat_bar(&newest_first, 4).into_string();
        assert!(
            svg.contains(r#"<path class="beat" d="M0 0h6v20h-6z"/>"#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"<path class="beat beat-up" d="M8 0h6v20h-6zM24 0h6v20h-6z"/>"#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"<path class="beat beat-down" d="M16 0h6v20h-6z"/>"#),
            "{svg}"
        );
        assert!(
            svg.contains("last 3 results: 2 up, 1 not up (newest: down at 1970-01-01 00:00:02)"),
            "{svg}"
        );
    }
}
