//! The parts of a URL that carry a credential, as views show them: a password, the whole query
//! (`?token=…` is how many services take a key, and a parameter's name may be the key too),
//! and each path segment that looks like a token (`is_token_like`). Used for channels'
//! addresses (`channel_secrets`) and `http` monitors' targets (`monitor_secrets`); owns only
//! that mapping, never what is stored or sent.

use shared_proto::notifications::HIDDEN;

/// What of `url` a view hides besides its password.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hide {
    /// The whole query and token-like path segments.
    QueryAndTokens,
    /// Everything after the host (an address that is itself the credential).
    Path,
    /// The password only (an address whose query holds how to connect, as email's).
    PasswordOnly,
}

/// `url` as a view shows it: as given when nothing in it is hidden (or it does not parse as a
/// URL), so that a view of a plain address is the address itself, byte for byte.
pub fn shown(url: &str, hide: Hide) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return url.to_string();
    };
    let before = parsed.to_string();
    match hide {
        Hide::Path => {
            parsed.set_path(&format!("/{HIDDEN}"));
            parsed.set_query(None);
            parsed.set_fragment(None);
        }
        Hide::QueryAndTokens => {
            if parsed.query().is_some() {
                parsed.set_query(Some(HIDDEN));
            }
            if let Some(segments) = parsed.path_segments() {
                let shown: Vec<&str> = segments
                    .map(|s| if is_token_like(s) { HIDDEN } else { s })
                    .collect();
                parsed.set_path(&shown.join("/"));
            }
        }
        Hide::PasswordOnly => {}
    }
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some(HIDDEN));
    }
    let after = parsed.to_string();
    if after == before && !after.contains(HIDDEN) {
        url.to_string()
    } else {
        after
    }
}

/// A path segment that may be a credential: 16 characters or more with a digit among them
/// (a UUID, `T0123ABC/B0456DEF/…`, a hex or base64 key), or 24 or more of any kind. Words such
/// as `api`, `v2`, `alerts` or `incoming` stay shown; hiding a long word by mistake costs only
/// its display.
fn is_token_like(segment: &str) -> bool {
    let len = segment.chars().count();
    len >= 24 || (len >= 16 && segment.chars().any(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_hides_what_it_says_and_a_password_always() {
        let url = "https://u:pw@hooks.example/x/4f0c2a1e-8a7b-4c61-9d3e-2b1f0a9c8d7e?token=abc";
        assert_eq!(
            shown(url, Hide::QueryAndTokens),
            "https://u:REDACTED@hooks.example/x/REDACTED?REDACTED"
        );
        assert_eq!(
            shown(url, Hide::Path),
            "https://u:REDACTED@hooks.example/REDACTED"
        );
        assert_eq!(
            shown(
                "smtp://u:pw@mail.example:587?tls=required",
                Hide::PasswordOnly
            ),
            "smtp://u:REDACTED@mail.example:587?tls=required"
        );
        assert_eq!(
            shown("db.internal:5432", Hide::QueryAndTokens),
            "db.internal:5432"
        );
        assert_eq!(
            shown("https://api.example.com/v2/health", Hide::QueryAndTokens),
            "https://api.example.com/v2/health"
        );
        // Nothing hidden: the address as given, not as the parser would write it.
        for plain in ["https://Example.com", "https://example.com:443/x#top"] {
            assert_eq!(shown(plain, Hide::QueryAndTokens), plain);
        }
    }
}
