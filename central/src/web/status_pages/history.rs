//! A status page's incident history, a month at a time (`/status/{slug}/history?month=YYYY-MM`,
//! this month without one): the incidents opened that month, newest first, each with its
//! timeline; links to the months before and after. Only months from the page's creation to
//! now exist (others are `404`), so the renderings kept (`shared`) are bounded by a page's age
//! in months. Must not: decide what is shown or to whom (`super::find` decides who).

use chrono::{DateTime, Datelike, NaiveDate, Utc};
use maud::{html, Markup, DOCTYPE};
use shared_proto::status_incidents::ShownIncident;

use super::html::incident;
use crate::service::time_of;

/// A calendar month (UTC), as months since year 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Month(i32);

impl Month {
    pub fn of(instant: DateTime<Utc>) -> Month {
        Month(instant.year() * 12 + instant.month0() as i32)
    }

    /// `YYYY-MM`, as the query writes it.
    pub fn parse(text: &str) -> Option<Month> {
        let (year, month) = text.split_once('-')?;
        let digits = |t: &str, n: usize| t.len() == n && t.bytes().all(|b| b.is_ascii_digit());
        if !(digits(year, 4) && digits(month, 2)) {
            return None;
        }
        let (year, month): (i32, u32) = (year.parse().ok()?, month.parse().ok()?);
        (1..=12)
            .contains(&month)
            .then(|| Month(year * 12 + month as i32 - 1))
    }

    fn first_day(self) -> NaiveDate {
        NaiveDate::from_ymd_opt(self.0.div_euclid(12), self.0.rem_euclid(12) as u32 + 1, 1)
            .unwrap_or_default()
    }

    /// Its first and the next month's first instant, in milliseconds.
    pub fn range_ms(self) -> (i64, i64) {
        let start = |m: Month| {
            m.first_day()
                .and_hms_opt(0, 0, 0)
                .unwrap_or_default()
                .and_utc()
                .timestamp_millis()
        };
        (start(self), start(Month(self.0 + 1)))
    }

    pub fn previous(self) -> Month {
        Month(self.0 - 1)
    }

    pub fn next(self) -> Month {
        Month(self.0 + 1)
    }

    fn query(self) -> String {
        self.first_day().format("%Y-%m").to_string()
    }

    fn words(self) -> String {
        self.first_day().format("%B %Y").to_string()
    }
}

/// The months a page has a history for: from the one it was made in to this one.
pub fn months_of(created_at: i64, now: i64) -> (Month, Month) {
    (Month::of(time_of(created_at)), Month::of(time_of(now)))
}

/// The history page's HTML for `month` of the page `title`/`slug`, whose months run
/// `first..=last`.
pub fn render(
    title: &str,
    slug: &str,
    month: Month,
    (first, last): (Month, Month),
    incidents: &[ShownIncident],
) -> Markup {
    let link = |m: Month| format!("/status/{slug}/history?month={}", m.query());
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Incident history: " (title) }
                link rel="stylesheet" href=(crate::web::assets::path("status.css"));
            }
            body {
                main {
                    header {
                        h1 { "Incident history" }
                        p.description { a href=(format!("/status/{slug}")) { (title) } }
                    }
                    section.past aria-label=(month.words()) {
                        h2 { (month.words()) }
                        @if incidents.is_empty() {
                            p.quiet { "No incidents in " (month.words()) "." }
                        }
                        @for i in incidents { (incident(i)) }
                    }
                    nav.history-nav aria-label="Months" {
                        @if month > first {
                            a href=(link(month.previous())) rel="prev" { "← " (month.previous().words()) }
                        } @else { span {} }
                        @if month < last {
                            a href=(link(month.next())) rel="next" { (month.next().words()) " →" }
                        }
                    }
                }
                footer { p { "Status page served by central." } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_read_and_run_into_each_other() {
        let december = Month::parse("2026-12").unwrap();
        assert_eq!(december.next(), Month::parse("2027-01").unwrap());
        assert_eq!(december.next().previous(), december);
        let (start, end) = december.range_ms();
        assert_eq!(time_of(start).to_rfc3339(), "2026-12-01T00:00:00+00:00");
        assert_eq!(time_of(end).to_rfc3339(), "2027-01-01T00:00:00+00:00");
        assert_eq!(Month::of(time_of(end - 1)), december);
        assert_eq!(december.query(), "2026-12");
        assert_eq!(december.words(), "December 2026");
        for bad in [
            "2026-+1", "+026-01", "2026-13", "2026-00", "2026-1", "26-01", "2026/01", "", "2026-1a",
        ] {
            assert_eq!(Month::parse(bad), None, "{bad}");
        }
    }
}
