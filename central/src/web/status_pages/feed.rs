//! A status page's Atom feed (`/status/{slug}/feed.atom`), from what the page shows: an entry
//! per incident (its timeline as the content, updated with its newest update) and per
//! maintenance occurrence. Made with the page's shared rendering, from the same summary, so
//! a feed reader costs what a visitor costs. Must not: decide what is shown.

use atom_syndication::{Content, Entry, Feed, Link, Text};
use chrono::{DateTime, Utc};
use shared_proto::status_incidents::{ShownIncident, ShownMaintenance};
use shared_proto::status_pages::StatusSummary;
use uuid::Uuid;

use crate::web::markdown;

fn link(href: String) -> Link {
    let mut link = Link::default();
    link.set_href(href);
    link
}

fn html_content(html: String) -> Content {
    let mut content = Content::default();
    content.set_content_type("html".to_string());
    content.set_value(html);
    content
}

fn incident_entry(incident: &ShownIncident, page: &str) -> Entry {
    let mut entry = Entry::default();
    entry.set_id(format!("urn:uuid:{}", incident.id));
    entry.set_title(Text::plain(format!(
        "{} ({})",
        incident.title,
        incident.status.words()
    )));
    let updated = incident
        .updates
        .first()
        .map_or(incident.started_at, |u| u.at);
    entry.set_updated(updated);
    entry.set_published(Some(incident.started_at.into()));
    entry.set_links(vec![link(page.to_string())]);
    let mut html = String::new();
    if !incident.affected.is_empty() {
        let affects = maud::html! { p { "Affects " (incident.affected.join(", ")) } };
        html.push_str(&affects.into_string());
    }
    for update in &incident.updates {
        html.push_str(&format!(
            "<p><strong>{}</strong> · {}</p>{}",
            update.status.words(),
            update.at.format("%Y-%m-%d %H:%M UTC"),
            markdown::to_html(&update.message)
        ));
    }
    entry.set_content(Some(html_content(html)));
    entry
}

fn maintenance_entry(maintenance: &ShownMaintenance, page_id: Uuid, page: &str) -> Entry {
    let (starts, ends) = (maintenance.starts_at, maintenance.ends_at);
    let mut entry = Entry::default();
    // One occurrence keeps its id whenever the feed is made.
    let name = format!("maintenance {} {}", starts.timestamp(), ends.timestamp());
    entry.set_id(format!(
        "urn:uuid:{}",
        Uuid::new_v5(&page_id, name.as_bytes())
    ));
    entry.set_title(Text::plain(format!(
        "Maintenance {} to {}",
        starts.format("%Y-%m-%d %H:%M UTC"),
        ends.format("%Y-%m-%d %H:%M UTC")
    )));
    entry.set_updated(starts);
    entry.set_links(vec![link(page.to_string())]);
    if !maintenance.affected.is_empty() {
        let affects = maud::html! { p { "Affects " (maintenance.affected.join(", ")) } };
        entry.set_content(Some(html_content(affects.into_string())));
    }
    entry
}

/// The feed's XML.
pub fn feed(summary: &StatusSummary, page_id: Uuid) -> String {
    let page = format!("/status/{}", summary.page.slug);
    let mut entries: Vec<Entry> = summary
        .incidents
        .iter()
        .map(|incident| incident_entry(incident, &page))
        .chain(
            summary
                .maintenance
                .iter()
                .map(|m| maintenance_entry(m, page_id, &page)),
        )
        .collect();
    entries.sort_by(|a, b| b.updated().cmp(a.updated()));
    // Updated when its newest entry was; a feed without any, when it was made.
    let updated: DateTime<Utc> = entries
        .first()
        .map_or(summary.generated_at, |e| e.updated().with_timezone(&Utc));
    let mut feed = Feed::default();
    feed.set_id(format!("urn:uuid:{page_id}"));
    feed.set_title(Text::plain(format!(
        "{}: incidents and maintenance",
        summary.page.title
    )));
    feed.set_updated(updated);
    let mut me = link(format!("{page}/feed.atom"));
    me.set_rel("self".to_string());
    feed.set_links(vec![link(page), me]);
    feed.set_entries(entries);
    feed.to_string()
}
