//! The page shell (head, navigation, logout form) and the small pieces every page shares:
//! status badges, times, numbers.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::session::Session;
use crate::service::access::Role;

/// Which section of the navigation a page belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Monitors,
    Pollers,
    Tokens,
    Notifications,
    Dependencies,
    Maintenance,
    StatusPages,
    Audit,
    Users,
    ApiKeys,
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            // htmx would add its indicator styles as an inline <style>, which the Content
            // Security Policy refuses (the page has no indicators).
            meta name="htmx-config" content=r#"{"includeIndicatorStyles":false}"#;
            title { (title) " · Central" }
            link rel="stylesheet" href=(super::assets::path("app.css"));
            script src=(super::assets::path("htmx.min.js")) defer {}
            script src=(super::assets::path("app.js")) defer {}
        }
    }
}

/// A page without navigation (login, errors).
pub fn bare(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body { (body) }
        }
    }
}

/// A page of the logged-in operator.
pub fn page(session: &Session, section: Section, title: &str, body: Markup) -> Markup {
    let link = |href: &str, label: &str, own: Section| {
        html! {
            a href=(href) aria-current=[(own == section).then_some("page")] { (label) }
        }
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            // The role, for the style sheet: a viewer is not offered the forms and links the
            // server would refuse them (`403`), which stays the rule (`access`).
            body data-role=(session.session.principal.role.as_str()) {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    span.brand { "Central" }
                    nav aria-label="Sections" {
                        (link("/", "Monitors", Section::Monitors))
                        (link("/pollers", "Pollers", Section::Pollers))
                        (link("/maintenance", "Maintenance", Section::Maintenance))
                        (link("/status-pages", "Status pages", Section::StatusPages))
                        (link("/dependencies", "Dependencies", Section::Dependencies))
                        (link("/notifications", "Notifications", Section::Notifications))
                        (link("/api-keys", "API keys", Section::ApiKeys))
                        @if session.session.principal.role == Role::Admin {
                            (link("/tokens", "Tokens", Section::Tokens))
                            (link("/users", "Users", Section::Users))
                            (link("/audit", "Audit", Section::Audit))
                        }
                    }
                    form.logout method="post" action="/logout" {
                        (csrf_field(session))
                        button type="submit" { "Log out" }
                    }
                }
                main #main { (body) }
            }
        }
    }
}

/// The warning on an object a configuration file manages (`central apply`).
pub fn managed_note(key: &str) -> Markup {
    html! {
        p.warning role="note" {
            "Managed by a configuration file, as " code { (key) } ". A change saved here is \
             undone by the next " code { "central apply" } " of that file: change the file instead."
        }
    }
}

pub fn csrf_field(session: &Session) -> Markup {
    html! { input type="hidden" name="csrf" value=(session.csrf()); }
}

pub fn error_page(status: StatusCode, message: &str) -> Response {
    let title = status.canonical_reason().unwrap_or("Error");
    let body = html! {
        main.login {
            h1 { (status.as_u16()) " " (title) }
            p role="alert" { (message) }
            p { a href="/" { "Back to the monitors" } }
        }
    };
    (status, bare(title, body)).into_response()
}

/// An enum's name on the wire (`"online"`, `"webhook"`), for showing it as the API does.
pub fn wire_name(value: impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// A status as a coloured word (the colour is never the only sign: the word is there).
pub fn badge(status: &str) -> Markup {
    html! { span class={ "badge badge-" (status) } { (status) } }
}

/// "3 min ago", with the exact time on hover and for screen readers' `datetime`.
pub fn ago(at: DateTime<Utc>, now: DateTime<Utc>) -> Markup {
    let seconds = (now - at).num_seconds();
    let text = match seconds {
        s if s < 0 => "just now".to_string(),
        s if s < 60 => format!("{s} s ago"),
        s if s < 3600 => format!("{} min ago", s / 60),
        s if s < 86_400 => format!("{} h ago", s / 3600),
        s => format!("{} d ago", s / 86_400),
    };
    let exact = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    html! { time datetime=(exact) title=(exact) { (text) } }
}

pub fn maybe_ago(at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Markup {
    match at {
        Some(at) => ago(at, now),
        None => html! { span.muted { "never" } },
    }
}

pub fn percent(value: Option<f64>) -> Markup {
    match value {
        Some(v) if v >= 99.995 => html! { "100 %" },
        Some(v) => html! { (format!("{v:.2} %")) },
        None => html! { span.muted { "–" } },
    }
}

/// A length of time in its two largest units: `3 d 4 h`, `5 min`, `0 s`.
pub fn duration(ms: u64) -> Markup {
    html! { (duration_text(ms)) }
}

pub fn duration_text(ms: u64) -> String {
    let s = ms / 1_000;
    let parts = [
        (s / 86_400, "d"),
        (s % 86_400 / 3_600, "h"),
        (s % 3_600 / 60, "min"),
        (s % 60, "s"),
    ];
    let largest = parts.iter().position(|(n, _)| *n > 0).unwrap_or(3);
    parts[largest..(largest + 2).min(4)]
        .iter()
        .enumerate()
        .filter(|(i, (n, _))| *i == 0 || *n > 0)
        .map(|(_, (n, unit))| format!("{n} {unit}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn millis(value: Option<u64>) -> Markup {
    match value {
        Some(v) => html! { (v) " ms" },
        None => html! { span.muted { "–" } },
    }
}

/// Raw markup for a fixed string known to be safe (inline SVG made here).
pub fn trusted(markup: String) -> PreEscaped<String> {
    PreEscaped(markup)
}

#[cfg(test)]
mod tests {
    use super::duration_text;

    #[test]
    fn durations_show_their_two_largest_units() {
        assert_eq!(duration_text(0), "0 s");
        assert_eq!(duration_text(59_999), "59 s");
        assert_eq!(duration_text(300_000), "5 min");
        assert_eq!(duration_text(3_723_000), "1 h 2 min");
        assert_eq!(duration_text(90_061_000), "1 d 1 h");
    }
}
