//! Charts drawn on the server as inline SVG: the heartbeat bar of recent results and the
//! latency chart of history buckets. No script draws anything, so they show with JavaScript off.

use std::fmt::Write;

use maud::{html, Markup};
use shared_proto::history::HistoryBucket;

use super::layout::trusted;
use crate::store::ResultRow;

/// One bar per result, oldest on the left; each bar's colour says its status and its title
/// says when and what (for pointer and screen-reader users alike).
pub fn heartbeat_bar(beats_newest_first: &[ResultRow], slots: usize) -> Markup {
    const BAR: usize = 6;
    const GAP: usize = 2;
    let width = slots * (BAR + GAP);
    let up = beats_newest_first
        .iter()
        .filter(|b| b.status == "up")
        .count();
    let label = format!(
        "last {} results: {} up, {} not up",
        beats_newest_first.len(),
        up,
        beats_newest_first.len() - up
    );
    let mut svg = format!(
        r#"<svg class="beats" viewBox="0 0 {width} 20" width="{width}" height="20" role="img" aria-label="{label}">"#
    );
    let empty = slots.saturating_sub(beats_newest_first.len());
    for slot in 0..empty {
        let _ = write!(
            svg,
            r#"<rect class="beat" x="{x}" y="0" width="{BAR}" height="20" rx="2"/>"#,
            x = slot * (BAR + GAP)
        );
    }
    for (slot, beat) in (empty..slots).zip(beats_newest_first.iter().rev()) {
        let when =
            crate::service::time_of(beat.ts).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let latency = beat
            .latency_ms
            .map(|l| format!(", {l} ms"))
            .unwrap_or_default();
        let _ = write!(
            svg,
            r#"<rect class="beat beat-{status}" x="{x}" y="0" width="{BAR}" height="20" rx="2"><title>{when}: {status}{latency} {msg}</title></rect>"#,
            status = escape(&beat.status),
            x = slot * (BAR + GAP),
            msg = escape(&beat.msg),
        );
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

    #[test]
    fn a_hostile_message_stays_text() {
        let beat = ResultRow {
            id: "r".into(),
            monitor_id: "m".into(),
            poller_id: "p".into(),
            region: None,
            ts: 0,
            status: "down".into(),
            latency_ms: None,
            msg: "<script>alert(1)</script>\"".into(),
            meta: "{}".into(),
        };
        let svg = heartbeat_bar(&[beat], 50).into_string();
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;"), "{svg}");
    }
}
