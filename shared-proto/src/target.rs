//! What a monitor's `target` may be, per kind: the regular expressions the OpenAPI document
//! states (each kind's `target.pattern`), and the checks no pattern can state.
//!
//! The patterns are the rule, not a description of it: central matches a target against the
//! very same strings before anything else, so a client that validates against the document
//! agrees with the server (a mismatch is `400 invalid_field`). What the patterns leave open —
//! an IPv6 address in brackets that does not parse, a host name over 253 characters, a
//! `xn--` label that is not valid punycode — is refused after them with `422 invalid_value`.
//! Owns no I/O; the agent reads targets with [`split_host_port`].

use std::net::Ipv6Addr;
use std::sync::LazyLock;

use regex::Regex;

use crate::monitor::CheckKind;
use crate::ValidationError;

/// The longest target of any kind, in characters (`maxLength`).
pub const MAX_TARGET_LEN: usize = 2048;
/// The longest `dns` target: a 253-character name and its optional root dot.
pub const MAX_DNS_TARGET_LEN: usize = 254;
const MAX_HOST_NAME_LEN: usize = 253;

// The pieces, as macros so that `concat!` can join them into `&'static str` constants.
// A label: letters, digits, `_` and inner `-`, at most 63 (RFC 1035, with RFC 2782's `_`).
macro_rules! label {
    () => {
        "[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
    };
}
// A host name's last label starts with a letter or `_`, so that a name is never read as an
// IPv4 address (WHATWG URL parsing reads `a.1` as one).
macro_rules! host_name {
    () => {
        concat!(
            "(?:",
            label!(),
            "\\.)*[A-Za-z_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
        )
    };
}
macro_rules! ipv4 {
    () => {
        "(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
    };
}
// The shape of a bracketed IPv6 address; whether it parses is checked after the pattern.
macro_rules! ipv6 {
    () => {
        "\\[[0-9A-Fa-f:.]{2,45}\\]"
    };
}
macro_rules! host {
    () => {
        concat!("(?:", host_name!(), "|", ipv4!(), "|", ipv6!(), ")")
    };
}
// 1 to 65535, without leading zeros.
macro_rules! port {
    () => {
        "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
    };
}

/// `http`: an http(s) URL of a host (no `user:password@`: a target is shown on every page;
/// credentials go in `settings.headers`), an optional port, then printable ASCII (a path,
/// query or fragment; other characters are percent-encoded).
pub const HTTP_PATTERN: &str = concat!(
    "^https?://",
    host!(),
    "(?::",
    port!(),
    ")?(?:[/?#][\\x21-\\x7e]*)?$"
);
/// `tcp`: `host:port`, an IPv6 address in brackets (`[2001:db8::1]:22`).
pub const TCP_PATTERN: &str = concat!("^", host!(), ":", port!(), "$");
/// `tls`: `host` or `host:port` (443 when left out).
pub const TLS_PATTERN: &str = concat!("^", host!(), "(?::", port!(), ")?$");
/// `dns`: a domain name, optionally ending with the root's dot.
pub const DNS_PATTERN: &str = concat!("^", host_name!(), "\\.?$");
/// `ip:port` of a name server (`settings.nameserver` of a `dns` monitor); port 0 excluded.
pub const NAMESERVER_PATTERN: &str = concat!("^(?:", ipv4!(), "|", ipv6!(), "):", port!(), "$");

/// `icmp`: a host name or an IPv4 address, or an IPv6 address bare or in brackets (no port).
pub const ICMP_PATTERN: &str = concat!("^(?:", host!(), "|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]{1,44})$");
/// `heartbeat`: nothing is connected to; the target says what reports in (a job, a host),
/// any text that is not blank and holds no control character.
pub const HEARTBEAT_PATTERN: &str =
    r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$";

/// The pattern of a kind's target, as the OpenAPI document states it.
pub fn pattern(kind: CheckKind) -> &'static str {
    match kind {
        CheckKind::Http => HTTP_PATTERN,
        CheckKind::Tcp => TCP_PATTERN,
        CheckKind::Tls => TLS_PATTERN,
        CheckKind::Dns => DNS_PATTERN,
        CheckKind::Icmp => ICMP_PATTERN,
        CheckKind::Heartbeat => HEARTBEAT_PATTERN,
    }
}

/// The userinfo of an SMTP URL (`user:password@`), as RFC 3986 spells it.
macro_rules! userinfo {
    () => {
        "[A-Za-z0-9._~%!$&'()*+,;=-]+(?::[A-Za-z0-9._~%!$&'()*+,;=:-]*)?@"
    };
}

/// An email channel's server: `smtp://` or `smtps://`, an optional `user:password@`, a host,
/// an optional port and query (`?tls=required`).
pub const SMTP_URL_PATTERN: &str = concat!(
    "^smtps?://(?:",
    userinfo!(),
    ")?",
    host!(),
    "(?::",
    port!(),
    ")?/?(?:\\?[\\x21-\\x7e]*)?$"
);

const PATTERNS: [&str; 8] = [
    HEARTBEAT_PATTERN,
    ICMP_PATTERN,
    HTTP_PATTERN,
    TCP_PATTERN,
    TLS_PATTERN,
    DNS_PATTERN,
    NAMESERVER_PATTERN,
    SMTP_URL_PATTERN,
];

/// Whether `text` matches `pattern`, one of this module's patterns. Compiled once: these are
/// constants, not state.
pub fn is_match(pattern: &'static str, text: &str) -> bool {
    static COMPILED: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
        PATTERNS
            .iter()
            .map(|p| (*p, Regex::new(p).expect("a valid pattern")))
            .collect()
    });
    COMPILED
        .iter()
        .find(|(p, _)| *p == pattern)
        .map(|(_, regex)| regex.is_match(text))
        .expect("one of target's patterns")
}

/// Whether `text` is a name server address as [`NAMESERVER_PATTERN`] states it.
pub fn matches_nameserver(text: &str) -> bool {
    is_match(NAMESERVER_PATTERN, text)
}

/// An http(s) URL the pattern admitted, or an smtp(s) one: the URL parser may still refuse
/// what no pattern states (an IPv6 address that does not parse, a `xn--` label).
pub fn usable_url(field: &str, text: &str) -> Result<url::Url, ValidationError> {
    let url = url::Url::parse(text)
        .map_err(|e| ValidationError::value(field, format!("`{text}` is not a usable URL: {e}")))?;
    host_is_usable(url.host_str().unwrap_or_default()).map_err(|e| ValidationError {
        field: field.into(),
        ..e
    })?;
    Ok(url)
}

/// How to write a target of each kind, for messages.
fn example(kind: CheckKind) -> &'static str {
    match kind {
        CheckKind::Http => "an http:// or https:// URL, like https://example.com/health",
        CheckKind::Tcp => "host:port, like db.example.com:5432 or [2001:db8::1]:22",
        CheckKind::Tls => "a host or host:port, like example.com or example.com:8443",
        CheckKind::Dns => "a domain name, like example.com",
        CheckKind::Icmp => {
            "a host name or an IP address, like example.com, 192.0.2.1 or 2001:db8::1"
        }
        CheckKind::Heartbeat => "text naming what pings (a job, a host), like nightly-backup",
    }
}

/// The target on its own: not empty, at most [`MAX_TARGET_LEN`] characters. What any kind
/// accepts (a `PATCH` body, which names no kind, is checked this far).
pub fn validate_target_length(target: &str) -> Result<(), ValidationError> {
    if target.is_empty() {
        return Err(ValidationError::new("target", "must not be empty"));
    }
    if target.chars().count() > MAX_TARGET_LEN {
        return Err(ValidationError::new(
            "target",
            format!("must be at most {MAX_TARGET_LEN} characters"),
        ));
    }
    Ok(())
}

/// A target of `kind`: the kind's pattern (`invalid_field`), then what it leaves open
/// (`invalid_value`).
pub fn validate_target(kind: CheckKind, target: &str) -> Result<(), ValidationError> {
    validate_target_length(target)?;
    let max = match kind {
        CheckKind::Dns => MAX_DNS_TARGET_LEN,
        _ => MAX_TARGET_LEN,
    };
    if target.len() > max || !is_match(pattern(kind), target) {
        return Err(ValidationError::new(
            "target",
            format!("`{target}` must be {}", example(kind)),
        ));
    }
    let unusable = |why: String| Err(ValidationError::value("target", why));
    match kind {
        // The pattern admits only ASCII hosts; the URL parser still decodes `xn--` labels
        // and may refuse them.
        CheckKind::Http => usable_url("target", target).map(drop),
        CheckKind::Tcp | CheckKind::Tls => match split_host_port(target) {
            Some((host, _)) => host_is_usable(host),
            None => unusable(format!("`{target}` must be {}", example(kind))),
        },
        CheckKind::Dns => host_is_usable(target.strip_suffix('.').unwrap_or(target)),
        CheckKind::Icmp => host_is_usable(target),
        CheckKind::Heartbeat => Ok(()),
    }
}

/// A host the pattern admitted: a bracketed IPv6 address must parse, a name must fit DNS.
fn host_is_usable(host: &str) -> Result<(), ValidationError> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.contains(':') {
        return match host.parse::<Ipv6Addr>() {
            Ok(_) => Ok(()),
            Err(_) => Err(ValidationError::value(
                "target",
                format!("`[{host}]` is not an IPv6 address"),
            )),
        };
    }
    if host.len() > MAX_HOST_NAME_LEN {
        return Err(ValidationError::value(
            "target",
            format!("a host name has at most {MAX_HOST_NAME_LEN} characters"),
        ));
    }
    Ok(())
}

/// Splits `host:port`, `[v6]:port`, or a bare host. `None` if the port is not a number.
pub fn split_host_port(target: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = target.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match target.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => Some((host, Some(port.parse().ok()?))),
        Some(_) => Some((target, None)),
        None => Some((target, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rule;

    fn rule(kind: CheckKind, target: &str) -> Option<Rule> {
        validate_target(kind, target).err().map(|e| e.rule)
    }

    #[test]
    fn each_kind_takes_its_own_form() {
        use CheckKind::*;
        let accepted = [
            (Http, "https://example.com/health"),
            (Http, "http://127.0.0.1:8080/x?y=1#z"),
            (Http, "http://[::1]:80/"),
            (Http, "https://_srv.Example-1.com"),
            (Tcp, "db.example.com:5432"),
            (Tcp, "[2001:db8::1]:22"),
            (Tcp, "10.0.0.1:65535"),
            (Tls, "example.com"),
            (Tls, "example.com:8443"),
            (Dns, "example.com"),
            (Dns, "example.com."),
            (Dns, "_dmarc.example.com"),
            (Dns, "localhost"),
        ];
        for (kind, target) in accepted {
            assert_eq!(rule(kind, target), None, "{kind} {target}");
        }
        let refused = [
            (Http, "ftp://example.com"),
            (Http, "https://user:pw@example.com/"),
            (Http, "https://example.com:0/"),
            (Http, "https://example.com:65536/"),
            (Http, "https://a.1/"),
            (Http, "https://exa mple.com/"),
            (Http, "https://example.com/ä"),
            (Tcp, "example.com"),
            (Tcp, "example.com:080"),
            (Tcp, "256.0.0.1:80"),
            (Tcp, "-a.com:80"),
            (Tls, "example.com:"),
            (Dns, "example..com"),
            (Dns, "example.com:53"),
            (Dns, "1.2.3.4"),
        ];
        for (kind, target) in refused {
            assert_eq!(rule(kind, target), Some(Rule::Field), "{kind} {target}");
        }
        let unusable = [
            (Tcp, "[1:2:3]:80"),
            (Http, "http://[1:2:3]/"),
            (Dns, &format!("{}comm", "a.".repeat(125))),
        ];
        for (kind, target) in unusable {
            assert_eq!(rule(kind, target), Some(Rule::Value), "{kind} {target}");
        }
    }

    /// A kind and a target drawn from its pattern (anchors dropped: the generator adds none).
    fn drawn_target() -> impl proptest::strategy::Strategy<Value = (CheckKind, String)> {
        use proptest::strategy::Strategy;
        proptest::sample::select(CheckKind::ALL.to_vec()).prop_flat_map(|kind| {
            let unanchored = pattern(kind).trim_start_matches('^').trim_end_matches('$');
            proptest::string::string_regex(unanchored)
                .expect("the pattern is in the generator's syntax")
                .prop_map(move |target| (kind, target))
        })
    }

    proptest::proptest! {
        /// What a client draws from a kind's pattern (as the API fuzzer does) is never refused
        /// as breaking the schema: at worst it is unusable (`422`).
        #[test]
        fn what_the_patterns_admit_is_never_a_field_error((kind, target) in drawn_target()) {
            if kind != CheckKind::Dns || target.len() <= MAX_DNS_TARGET_LEN {
                proptest::prop_assert_ne!(rule(kind, &target), Some(Rule::Field), "{} {}", kind, target);
            }
        }
    }

    #[test]
    fn the_nameserver_pattern_admits_socket_addresses_only() {
        for ok in ["1.1.1.1:53", "[::1]:5353", "127.0.0.1:65535"] {
            assert!(matches_nameserver(ok), "{ok}");
        }
        for bad in [
            "1.1.1.1",
            "dns.google:53",
            "1.1.1.1:0",
            "01.1.1.1:53",
            "[::1]",
        ] {
            assert!(!matches_nameserver(bad), "{bad}");
        }
    }

    #[test]
    fn smtp_urls_take_a_login_and_a_query() {
        for ok in [
            "smtp://mail.example.com:587",
            "smtps://user:p%40ss@mail.example.com/",
            "smtp://u:REDACTED@127.0.0.1:2525?tls=required",
        ] {
            assert!(is_match(SMTP_URL_PATTERN, ok), "{ok}");
        }
        for bad in [
            "http://mail.example.com",
            "smtp://mail.example.com:0",
            "smtp://a b",
        ] {
            assert!(!is_match(SMTP_URL_PATTERN, bad), "{bad}");
        }
    }

    #[test]
    fn host_port_splitting() {
        assert_eq!(split_host_port("a.com:80"), Some(("a.com", Some(80))));
        assert_eq!(split_host_port("a.com"), Some(("a.com", None)));
        assert_eq!(split_host_port("[::1]:22"), Some(("::1", Some(22))));
        assert_eq!(split_host_port("a.com:x"), None);
    }
}
