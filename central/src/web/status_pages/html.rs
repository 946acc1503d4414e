//! A status page's HTML, from what it shows (`StatusSummary`): one rendering for every reader,
//! that reads fine without JavaScript, light and dark from `prefers-color-scheme`, nothing
//! loaded from elsewhere; and the small pages a visitor meets instead (not found, private, the
//! password form). Must not: decide what is shown or to whom.

use maud::{html, Markup, DOCTYPE};
use shared_proto::status_pages::{
    OutageScale, PageStatus, ShownDay, ShownMonitor, ShownStatus, StatusSummary,
};

fn banner(summary: &StatusSummary) -> (&'static str, &'static str) {
    match (summary.status, summary.outage) {
        (PageStatus::Operational, _) => ("operational", "All systems operational"),
        (PageStatus::Degraded, _) => ("degraded", "Degraded performance"),
        (PageStatus::Outage, Some(OutageScale::Major)) => ("major", "Major outage"),
        (PageStatus::Outage, _) => ("partial", "Partial outage"),
        (PageStatus::Maintenance, _) => ("maintenance", "Under maintenance"),
        (PageStatus::Unknown, _) => ("unknown", "Status unknown"),
    }
}

fn status_words(status: ShownStatus) -> (&'static str, &'static str) {
    match status {
        ShownStatus::Up => ("up", "Operational"),
        ShownStatus::Degraded => ("degraded", "Degraded"),
        ShownStatus::Down => ("down", "Down"),
        ShownStatus::Maintenance => ("maintenance", "Maintenance"),
        ShownStatus::Unknown => ("unknown", "No data"),
    }
}

/// A day's cell: its class by uptime, and its tooltip.
fn day_cell(day: &ShownDay) -> (&'static str, String) {
    match day.uptime {
        None => ("none", format!("{}: no data", day.date)),
        Some(uptime) => {
            let class = if uptime >= 99.9 {
                "up"
            } else if uptime >= 95.0 {
                "partial"
            } else {
                "down"
            };
            (class, format!("{}: {} up", day.date, percent(uptime)))
        }
    }
}

/// Percent with two decimals, cut rather than rounded (99.996 % is not 100 %).
pub(crate) fn percent(uptime: f64) -> String {
    if uptime >= 100.0 {
        "100%".into()
    } else {
        format!("{:.2}%", (uptime * 100.0).floor() / 100.0)
    }
}

fn monitor(m: &ShownMonitor) -> Markup {
    let (class, words) = status_words(m.status);
    let uptime = m.uptime_90d.map_or("no data".to_string(), percent);
    html! {
        li.monitor {
            div.line {
                span.name { (m.name) }
                span class=(format!("status status-{class}")) { (words) }
            }
            div.bars role="img" aria-label=(format!("{}: uptime over 90 days {uptime}", m.name)) {
                @for day in &m.days {
                    @let (class, tip) = day_cell(day);
                    // Short markup: 90 cells a monitor are most of the page's bytes.
                    i class=(class) title=(tip) {}
                }
            }
            div.legend aria-hidden="true" {
                span { "90 days ago" }
                span { (uptime) " uptime" }
                span { "Today" }
            }
        }
    }
}

/// The page's HTML: one rendering for every reader.
pub fn render(summary: &StatusSummary) -> Markup {
    let (class, words) = banner(summary);
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (summary.page.title) }
                link rel="stylesheet" href=(crate::web::assets::path("status.css"));
                link rel="alternate" type="application/json"
                    href=(format!("/status/{}/summary.json", summary.page.slug));
            }
            body {
                main {
                    header {
                        h1 { (summary.page.title) }
                        @if let Some(description) = &summary.page.description {
                            p.description { (description) }
                        }
                    }
                    section class=(format!("banner banner-{class}")) aria-label="Overall status" {
                        p.headline { (words) }
                        p.updated {
                            "As of "
                            time datetime=(summary.generated_at.to_rfc3339()) {
                                (summary.generated_at.format("%Y-%m-%d %H:%M UTC"))
                            }
                        }
                    }
                    @for section in &summary.sections {
                        section.group aria-label=(section.name) {
                            h2 { (section.name) }
                            ul.monitors {
                                @for m in &section.monitors { (monitor(m)) }
                            }
                        }
                    }
                }
                footer { p { "Status page served by central." } }
            }
        }
    }
}

/// A page of one message and what follows it (a form, a link), in the status pages' style.
pub(super) fn message_page(message: &str, then: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (message) }
                link rel="stylesheet" href=(crate::web::assets::path("status.css"));
            }
            body { main.message { h1 { (message) } (then) } }
        }
    }
}
