//! Telling a page's subscribers when maintenance over monitors it shows begins and ends
//! (`maintenance.started`, `maintenance.ended`), by occurrence, as the page shows them: the
//! monitors by their names on the page, never the window's own name.
//!
//! Each page keeps the instant its maintenance was told up to; a pass tells what began or
//! ended in `(told, now]` and moves the instant to `now` in the same transaction as the
//! notices, so an occurrence's start and end are each told once, late rather than never if the
//! lease holder was away (`maintenance_events`; a property test checks that passes at any
//! instants tell what one pass over the whole stretch would). A page starts telling from the
//! first pass after it has a confirmed subscriber, and forgets its instant when it has none
//! left: what happened while nobody listened is not news to anyone.
//!
//! Cost, per pass: the pages with a confirmed subscriber; for each, its monitors and the
//! windows not over at its instant, walked once each. Run by `duties::page_notices` every
//! `MAINTENANCE_EVERY` rounds. Must not: send (`notify::notices`).

use std::collections::BTreeMap;

use shared_proto::status_subscribers::{NoticeContent, NoticeEvent, NoticeMaintenance};
use uuid::Uuid;

use super::shown::{maintenance_spans, names_on_page, page_monitors};
use super::StatusPage;
use crate::domain::PageNotice;
use crate::service::error::ServiceResult;
use crate::service::{time_of, App};

/// What began or ended within `(from, until]` among `spans` (occurrences by `(start, end)`,
/// each with what it covers): `(at, event, span)`, in the order they happened.
pub fn maintenance_events(
    spans: &BTreeMap<(i64, i64), Vec<String>>,
    from: i64,
    until: i64,
) -> Vec<(i64, NoticeEvent, (i64, i64))> {
    let within = |at: i64| from < at && at <= until;
    let mut events = Vec::new();
    for &(start, end) in spans.keys() {
        if within(start) {
            events.push((start, NoticeEvent::MaintenanceStarted, (start, end)));
        }
        if within(end) {
            events.push((end, NoticeEvent::MaintenanceEnded, (start, end)));
        }
    }
    // Ends before starts at the same instant: one stretch over, the next begun.
    events.sort_by_key(|(at, event, _)| (*at, *event == NoticeEvent::MaintenanceStarted));
    events
}

/// One pass over the pages with subscribers: what maintenance began or ended since each was
/// last told, written as notices. How many notices.
pub async fn tell_maintenance(app: &App) -> ServiceResult<usize> {
    let now = app.now_ms();
    let mut told = 0;
    let (listened, quiet) = app.store.pages_told_maintenance().await?;
    for page_id in quiet {
        app.store.forget_maintenance_told(&page_id).await?;
    }
    for (page, from) in listened {
        let Some(since) = from else {
            // Its first subscriber: from now on.
            app.store
                .tell_maintenance(&page.id.to_string(), None, now, &[])
                .await?;
            continue;
        };
        if since >= now {
            continue;
        }
        let notices = maintenance_notices(app, &page, since, now).await?;
        if app
            .store
            .tell_maintenance(&page.id.to_string(), from, now, &notices)
            .await?
        {
            told += notices.len();
        }
    }
    Ok(told)
}

/// The notices of what began or ended on `page` within `(from, until]`.
async fn maintenance_notices(
    app: &App,
    page: &StatusPage,
    from: i64,
    until: i64,
) -> ServiceResult<Vec<PageNotice>> {
    let (section_ids, rows) = page_monitors(app, page).await?;
    let names = names_on_page(page, &section_ids, &rows)?;
    // Under way at `from`, or starting up to `until` (inclusive).
    let spans = maintenance_spans(app, &rows, &names, from, until.saturating_add(1)).await?;
    let mut notices = Vec::new();
    for (_, event, span) in maintenance_events(&spans, from, until) {
        let content = NoticeContent {
            event,
            at: time_of(until),
            incident: None,
            maintenance: Some(NoticeMaintenance {
                starts_at: time_of(span.0),
                ends_at: time_of(span.1),
                monitors: spans.get(&span).cloned().unwrap_or_default(),
            }),
        };
        notices.push(PageNotice {
            id: Uuid::now_v7().to_string(),
            page_id: page.id.to_string(),
            content,
            created_at: until,
        });
    }
    Ok(notices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spans(list: &[(i64, i64)]) -> BTreeMap<(i64, i64), Vec<String>> {
        list.iter().map(|s| (*s, vec!["API".to_string()])).collect()
    }

    #[test]
    fn a_stretch_is_told_when_it_begins_and_when_it_ends() {
        let spans = spans(&[(100, 200), (200, 300)]);
        let events = maintenance_events(&spans, 0, 1_000);
        let said: Vec<(i64, NoticeEvent)> = events.iter().map(|(at, e, _)| (*at, *e)).collect();
        assert_eq!(
            said,
            [
                (100, NoticeEvent::MaintenanceStarted),
                (200, NoticeEvent::MaintenanceEnded),
                (200, NoticeEvent::MaintenanceStarted),
                (300, NoticeEvent::MaintenanceEnded),
            ]
        );
        assert!(
            maintenance_events(&spans, 100, 199).is_empty(),
            "begun before"
        );
        assert_eq!(maintenance_events(&spans, 150, 250).len(), 2);
    }

    /// Through the store: a page's confirmed subscriber is told a window's start and end once
    /// each, by the monitor's name on the page and never the window's; nothing from before
    /// its first pass.
    #[tokio::test]
    async fn subscribers_are_told_when_maintenance_begins_and_ends() {
        use serde_json::json;
        let dir = tempfile::tempdir().unwrap();
        let mut args = crate::config::ServeArgs::with_sqlite_in(dir.path());
        args.public_url = Some("https://status.example.com".into());
        let start = 1_800_000_000_000;
        let (clock, handle) = crate::service::clock::Clock::manual(start);
        let app = App::open_with_clock(&args, clock).await.unwrap();
        let spec = serde_json::from_value(json!({
            "name": "db-primary-7", "kind": "http", "target": "http://127.0.0.1:9/",
            "interval_ms": 60_000,
        }))
        .unwrap();
        let monitor = app.create_monitor(spec).await.unwrap().id;
        let pages = app.status_pages();
        let spec = serde_json::from_value(json!({"slug": "acme", "title": "Acme",
            "sections": [{"name": "Data", "monitor_ids": [monitor],
                "display_names": [{"monitor_id": monitor, "name": "Database"}]}]}))
        .unwrap();
        let page = pages.create_page(spec).await.unwrap().id;
        let window = |name: &str, from_min: i64, to_min: i64| {
            serde_json::from_value(json!({"name": name, "monitor_ids": [monitor],
                "starts_at": time_of(start + from_min * 60_000).to_rfc3339(),
                "ends_at": time_of(start + to_min * 60_000).to_rfc3339()}))
            .unwrap()
        };
        app.maintenance()
            .create_window(window("before anyone listened", -5, 2))
            .await
            .unwrap();
        app.maintenance()
            .create_window(window("secret host upgrade", 10, 20))
            .await
            .unwrap();
        let found = pages.page_by_id(page).await.unwrap();
        let request = shared_proto::status_subscribers::SubscribeRequest {
            webhook_url: Some("https://hooks.example.com/x".into()),
            ..Default::default()
        };
        pages.subscribe(&found, &request).await.unwrap();
        let subscriber = app
            .store
            .subscriber_at(&page.to_string(), "https://hooks.example.com/x")
            .await
            .unwrap()
            .unwrap();
        // Its confirmation aside: what is due to it.
        // What it is sent, one at a time in its order, each taken as delivered.
        let told = |app: std::sync::Arc<App>| async move {
            let mut said = Vec::new();
            while let Some(d) = app.store.due_deliveries(i64::MAX, 100).await.unwrap().pop() {
                let attempt = crate::store::NoticeAttempt::Delivered;
                app.store
                    .record_notice_attempt(&d.id, &d.subscriber.id, &attempt, 0)
                    .await
                    .unwrap();
                if d.notice.event.starts_with("maintenance.") {
                    let content: NoticeContent = serde_json::from_str(&d.notice.content).unwrap();
                    said.push((content.event, content.maintenance.unwrap()));
                }
            }
            said
        };
        assert_eq!(
            tell_maintenance(&app).await.unwrap(),
            0,
            "no confirmed subscriber"
        );
        assert!(app
            .store
            .confirm_subscriber(&subscriber.id, start)
            .await
            .unwrap());
        assert_eq!(
            tell_maintenance(&app).await.unwrap(),
            0,
            "the first pass only starts"
        );
        for minute in [1, 3, 11, 15, 21, 30] {
            handle.set(start + minute * 60_000);
            tell_maintenance(&app).await.unwrap();
        }
        let said = told(app.clone()).await;
        let events: Vec<NoticeEvent> = said.iter().map(|(e, _)| *e).collect();
        assert_eq!(
            events,
            [
                NoticeEvent::MaintenanceEnded,
                NoticeEvent::MaintenanceStarted,
                NoticeEvent::MaintenanceEnded
            ],
            "the stretch under way when it started telling ends; the next begins and ends"
        );
        assert_eq!(said[1].1.monitors, ["Database"]);
        assert_eq!(said[1].1.starts_at, time_of(start + 10 * 60_000));
        let all = serde_json::to_string(&said.iter().map(|s| &s.1).collect::<Vec<_>>()).unwrap();
        assert!(
            !all.contains("secret") && !all.contains("db-primary"),
            "{all}"
        );
    }

    proptest! {
        /// Passes at any instants tell exactly what one pass over the whole stretch tells:
        /// nothing twice, nothing missed.
        #[test]
        fn passes_tell_each_start_and_end_once(
            list in proptest::collection::vec((0i64..1_000, 1i64..300), 0..8),
            mut cuts in proptest::collection::vec(0i64..1_400, 0..6),
        ) {
            let spans = spans(&list.iter().map(|(s, d)| (*s, s + d)).collect::<Vec<_>>());
            let whole = maintenance_events(&spans, -1, 1_400);
            cuts.push(-1);
            cuts.push(1_400);
            cuts.sort();
            let mut pieces = Vec::new();
            for pair in cuts.windows(2) {
                pieces.extend(maintenance_events(&spans, pair[0], pair[1]));
            }
            prop_assert_eq!(pieces, whole);
        }
    }
}
