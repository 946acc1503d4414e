//! Markdown an operator wrote (incident messages on status pages) as HTML that is safe on a
//! public page: raw HTML is shown as text, an image as its description (a page loads nothing
//! from elsewhere), and a link only to `http`, `https`, `mailto` or a relative address (any
//! other scheme, `javascript:` first, leaves its text unlinked). Must not: decide what is shown.
//!
//! pulldown-cmark parses and writes; the filter between the two is by hand because it is three
//! kinds of event, where a sanitiser (ammonia) would parse again the HTML just written.

use pulldown_cmark::{html, Event, Options, Parser, Tag, TagEnd};

/// Schemes a link on a status page may have.
const LINK_SCHEMES: [&str; 3] = ["http", "https", "mailto"];

/// Whether a link's address may be followed from a public page: one of `LINK_SCHEMES`, or no
/// scheme at all (relative). What precedes the first `:` is a scheme unless a `/`, `?` or `#`
/// comes first.
fn link_allowed(destination: &str) -> bool {
    let Some((scheme, _)) = destination.split_once(':') else {
        return true;
    };
    if scheme.contains(['/', '?', '#']) {
        return true;
    }
    LINK_SCHEMES
        .iter()
        .any(|allowed| scheme.eq_ignore_ascii_case(allowed))
}

/// The HTML of `markdown`, safe on a public page.
pub fn to_html(markdown: &str) -> String {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    // Whether each link open now was kept, so that its end is kept or dropped with it.
    let mut links: Vec<bool> = Vec::new();
    let events = Parser::new_ext(markdown, options).filter_map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        // An image's description (the events between these two) stays, as text.
        Event::Start(Tag::Image { .. }) | Event::End(TagEnd::Image) => None,
        Event::Start(Tag::Link { ref dest_url, .. }) => {
            let kept = link_allowed(dest_url);
            links.push(kept);
            kept.then_some(event)
        }
        Event::End(TagEnd::Link) => links.pop().unwrap_or(false).then_some(event),
        other => Some(other),
    });
    let mut out = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut out, events);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_html() {
        let html = to_html("**Down** since 10:02\n\n- api\n- [status](https://example.com/x)");
        assert!(html.contains("<strong>Down</strong>"), "{html}");
        assert!(html.contains("<li>api</li>"), "{html}");
        assert!(
            html.contains(r#"<a href="https://example.com/x">status</a>"#),
            "{html}"
        );
    }

    #[test]
    fn raw_html_is_text() {
        let html = to_html("<script>alert(1)</script>\n\nhi <img src=x onerror=alert(1)>");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
    }

    #[test]
    fn images_are_their_description() {
        let html = to_html("![the graph](https://tracker.example/pixel.png)");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("tracker.example"), "{html}");
        assert!(html.contains("the graph"), "{html}");
    }

    #[test]
    fn only_safe_links_are_links() {
        for bad in [
            "[x](javascript:alert(1))",
            "[x](JavaScript:alert(1))",
            "[x](data:text/html;base64,PHNjcmlwdD4=)",
            "[x](vbscript:msgbox)",
            "<javascript:alert(1)>",
        ] {
            let html = to_html(bad);
            assert!(!html.contains("<a"), "{bad}: {html}");
        }
        for good in [
            "[x](https://a.example)",
            "[x](mailto:ops@a.example)",
            "[x](/status/acme/history)",
            "[x](#top)",
            "[x](../a:b)",
        ] {
            let html = to_html(good);
            assert!(html.contains("<a href"), "{good}: {html}");
        }
        // A link inside a refused one's text neither opens nor closes the wrong element.
        let html = to_html("[a [b](https://b.example) c](javascript:x)");
        assert_eq!(
            html.matches("<a ").count(),
            html.matches("</a>").count(),
            "{html}"
        );
    }
}
