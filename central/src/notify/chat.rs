//! Chat rooms: a Microsoft Teams workflow's webhook (an Adaptive Card), a Discord webhook,
//! and a Telegram bot. Text in a message may come from a target (a check's message quotes
//! what it answered): Teams and Discord read Markdown, so its characters are escaped there
//! and nothing from outside can draw a link or mention anyone (Discord's `allowed_mentions`
//! is empty, and its link previews are off); Telegram gets plain text (no `parse_mode`).
//!
//! Owns the bodies these services document; sending is `super::webhook::post`'s.

use serde_json::json;
use shared_proto::notifications::Notification;

use super::facts::{Facts, Outgoing};

/// The Markdown characters that make links, emphasis, code, headings, spoilers and mentions,
/// escaped with a backslash (CommonMark's escapes, which Teams and Discord both read), so
/// text shows as written. Dots, dashes and colons stay as they are: lists and emoji from a
/// target's text change how a line looks, not what it links to or who it calls.
fn escape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\`*_[]()<>~|#@".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A Teams workflow ("Post to a channel when a webhook request is received") takes a message
/// with an Adaptive Card attachment.
pub fn teams(url: &str, message: &Notification, facts: &Facts) -> Outgoing {
    let color = match facts.severity {
        "critical" => "Attention",
        "warning" => "Warning",
        _ => "Good",
    };
    let mut facts_shown = vec![
        json!({"title": "Event", "value": message.event.as_str()}),
        json!({"title": "Status", "value": escape_markdown(&message.status)}),
    ];
    if let Some(locations) = &message.locations {
        for location in locations {
            facts_shown.push(json!({
                "title": escape_markdown(&location.region),
                "value": location.status.as_str(),
            }));
        }
    }
    let mut card = json!({
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            {"type": "TextBlock", "text": escape_markdown(&facts.headline), "weight": "Bolder",
             "size": "Medium", "color": color, "wrap": true},
            {"type": "FactSet", "facts": facts_shown},
        ],
    });
    if let Some(link) = &facts.link {
        card["actions"] =
            json!([{"type": "Action.OpenUrl", "title": "Open in central", "url": link}]);
    }
    Outgoing::json(
        url,
        json!({
            "type": "message",
            "attachments": [{
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": null,
                "content": card,
            }],
        }),
    )
}

/// Discord's limit on `content`.
const DISCORD_CONTENT: usize = 2000;
/// Discord's message flag that turns link previews off.
const SUPPRESS_EMBEDS: u64 = 1 << 2;

/// `POST {webhook url}` with `content`; nobody may be mentioned.
pub fn discord(url: &str, message: &Notification, facts: &Facts) -> Outgoing {
    let mut content = escape_markdown(&super::text(message));
    if let Some(link) = &facts.link {
        content.push_str(&format!("\n<{link}>"));
    }
    Outgoing::json(
        url,
        json!({
            "content": super::clip(&content, DISCORD_CONTENT),
            "username": "central",
            "allowed_mentions": {"parse": []},
            "flags": SUPPRESS_EMBEDS,
        }),
    )
}

/// Telegram's limit on a message's text.
const TELEGRAM_TEXT: usize = 4096;

/// `POST {url}/bot{token}/sendMessage` (url default `https://api.telegram.org`).
pub fn telegram(
    url: &str,
    token: &str,
    chat_id: &str,
    message: &Notification,
    facts: &Facts,
) -> Outgoing {
    let mut text = super::text(message);
    if let Some(link) = &facts.link {
        text.push('\n');
        text.push_str(link);
    }
    // A numeric chat travels as a number, as the Bot API documents it; `@channel` as text.
    let chat = chat_id
        .parse::<i64>()
        .map_or_else(|_| json!(chat_id), |n| json!(n));
    Outgoing::json(
        &format!("{}/bot{token}/sendMessage", url.trim_end_matches('/')),
        json!({
            "chat_id": chat,
            "text": super::clip(&text, TELEGRAM_TEXT),
            "link_preview_options": {"is_disabled": true},
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_shows_as_written() {
        let text = "[click](https://evil.example) **now** @everyone <@123>";
        let escaped = escape_markdown(text);
        assert_eq!(
            escaped,
            "\\[click\\]\\(https://evil.example\\) \\*\\*now\\*\\* \\@everyone \\<\\@123\\>"
        );
    }
}
