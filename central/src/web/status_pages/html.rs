//! A status page's HTML, from what it shows (`StatusSummary`): one rendering for every reader,
//! that reads fine without JavaScript, light and dark from `prefers-color-scheme`, nothing
//! loaded from elsewhere; and the small pages a visitor meets instead (not found, private, the
//! password form). Must not: decide what is shown or to whom.

use chrono::{DateTime, Utc};
use maud::{html, Markup, PreEscaped, DOCTYPE};
use shared_proto::status_incidents::{IncidentStatus, ShownIncident, ShownMaintenance};
use shared_proto::status_pages::{
    OutageScale, PageStatus, ShownDay, ShownMonitor, ShownStatus, StatusSummary,
};

use crate::web::markdown;

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

/// An instant as visitors read it, in a `<time>` element.
fn at(instant: &DateTime<Utc>) -> Markup {
    html! {
        time datetime=(instant.to_rfc3339()) { (instant.format("%Y-%m-%d %H:%M UTC")) }
    }
}

fn incident_class(status: IncidentStatus) -> &'static str {
    match status {
        IncidentStatus::Resolved => "status status-up",
        IncidentStatus::Monitoring => "status status-maintenance",
        IncidentStatus::Investigating | IncidentStatus::Identified => "status status-down",
    }
}

/// An incident with its timeline, newest update first; messages are the operator's Markdown,
/// made safe (`web::markdown`).
pub(super) fn incident(i: &ShownIncident) -> Markup {
    html! {
        article.incident {
            h3 { (i.title) }
            p.meta {
                span class=(incident_class(i.status)) { (i.status.words()) }
                @if !i.affected.is_empty() {
                    " · Affects " (i.affected.join(", "))
                }
            }
            ol.updates {
                @for u in &i.updates {
                    li {
                        p.when { strong { (u.status.words()) } " · " (at(&u.at)) }
                        div.text { (PreEscaped(markdown::to_html(&u.message))) }
                    }
                }
            }
        }
    }
}

fn maintenance(m: &ShownMaintenance) -> Markup {
    html! {
        li {
            (at(&m.starts_at)) " to " (at(&m.ends_at))
            @if !m.affected.is_empty() {
                " · " (m.affected.join(", "))
            }
        }
    }
}

/// Which subscriptions the page's form offers: mail when central sends mail, webhooks when
/// it has a public address for the links (`StatusPages::takes`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Offers {
    pub email: bool,
    pub webhook: bool,
}

/// The form that subscribes a visitor (a `POST`, no JavaScript needed).
fn subscribe_form(slug: &str, offers: Offers) -> Markup {
    html! {
        @if offers.email || offers.webhook {
            section.subscribe aria-label="Subscribe" {
                h2 { "Get told of incidents and maintenance" }
                @if offers.email {
                    form method="post" action=(format!("/status/{slug}/subscribe")) {
                        label for="subscribe-email" { "Email" }
                        input #subscribe-email type="email" name="email" required autocomplete="email";
                        button type="submit" { "Subscribe" }
                    }
                }
                @if offers.webhook {
                    details {
                        summary { "Or a webhook" }
                        form method="post" action=(format!("/status/{slug}/subscribe")) {
                            label for="subscribe-webhook" { "Webhook URL" }
                            input #subscribe-webhook type="url" name="webhook_url" required;
                            label for="subscribe-secret" { "Signing secret (optional)" }
                            input #subscribe-secret type="password" name="secret" autocomplete="off";
                            button type="submit" { "Subscribe the webhook" }
                        }
                    }
                }
            }
        }
    }
}

/// The page's HTML: one rendering for every reader.
/// `logo`: its address, when the page has one.
pub fn render(summary: &StatusSummary, offers: Offers, logo: Option<&str>) -> Markup {
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
                link rel="alternate" type="application/atom+xml"
                    title=(format!("{}: incidents and maintenance", summary.page.title))
                    href=(format!("/status/{}/feed.atom", summary.page.slug));
            }
            body {
                main {
                    header {
                        @if let Some(logo) = logo {
                            // Beside the title, which says what it is: no text of its own.
                            img.logo src=(logo) alt="" height="48";
                        }
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
                    @let open: Vec<&ShownIncident> = summary.incidents.iter()
                        .filter(|i| i.resolved_at.is_none()).collect();
                    @if !open.is_empty() {
                        section.incidents aria-label="Incidents" {
                            h2 { "Incidents" }
                            @for i in &open { (incident(i)) }
                        }
                    }
                    @let (now, planned): (Vec<&ShownMaintenance>, Vec<&ShownMaintenance>) =
                        summary.maintenance.iter().partition(|m| m.under_way);
                    @if !now.is_empty() {
                        section.maintenance aria-label="Maintenance under way" {
                            h2 { "Maintenance under way" }
                            ul { @for m in &now { (maintenance(m)) } }
                        }
                    }
                    @if !planned.is_empty() {
                        section.maintenance aria-label="Planned maintenance" {
                            h2 { "Planned maintenance" }
                            ul { @for m in &planned { (maintenance(m)) } }
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
                    @let past: Vec<&ShownIncident> = summary.incidents.iter()
                        .filter(|i| i.resolved_at.is_some()).collect();
                    section.past aria-label="Past incidents" {
                        h2 { "Past incidents" }
                        @if past.is_empty() {
                            p.quiet { "No incidents in the last 7 days." }
                        }
                        @for i in &past { (incident(i)) }
                        p {
                            a href=(format!("/status/{}/history", summary.page.slug)) { "Incident history" }
                            " · "
                            a href=(format!("/status/{}/feed.atom", summary.page.slug)) { "Atom feed" }
                        }
                    }
                    (subscribe_form(&summary.page.slug, offers))
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
