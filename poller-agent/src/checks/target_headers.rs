//! What a target's response headers ask of the poller: `Retry-After`, and the rate-limit
//! budget of `X-RateLimit-*`, `RateLimit-*` and the structured `RateLimit` header.
//!
//! Every value here is chosen by the target, so it is untrusted: parsed strictly, capped at
//! `MAX_WAIT`, never a panic. What to *do* with a budget is the engine's business, not this
//! module's.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

/// No target can ask for more quiet than this, however large its number (the engine caps it
/// further, at the monitor's `backoff_max_ms`, or 5 minutes when it sets none).
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

/// A target's rate-limit budget, as its last answer stated it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateBudget {
    /// Requests allowed per window, when the target says.
    pub limit: Option<u64>,
    /// Requests left in the current window.
    pub remaining: u64,
    /// Until the window resets, when the target says.
    pub reset: Option<Duration>,
}

/// `Retry-After` as delay-seconds or an HTTP date; a date in the past means now.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds).min(MAX_WAIT));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_WAIT),
    )
}

pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(value, now)
}

/// The budget, from whichever convention the target uses. `None` when it states no
/// remaining count, or states it in a form that does not parse.
pub fn rate_budget(headers: &HeaderMap, now: SystemTime) -> Option<RateBudget> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let number = |name: &str| text(name).and_then(parse_count);
    if let Some(remaining) = number("x-ratelimit-remaining") {
        return Some(RateBudget {
            limit: number("x-ratelimit-limit"),
            remaining,
            reset: text("x-ratelimit-reset").and_then(|v| parse_reset(v, now)),
        });
    }
    if let Some(remaining) = number("ratelimit-remaining") {
        return Some(RateBudget {
            limit: number("ratelimit-limit"),
            remaining,
            // The IETF draft states a delay in seconds, never a time.
            reset: number("ratelimit-reset").map(capped_seconds),
        });
    }
    let structured = parameters(text("ratelimit")?);
    let find = |keys: &[&str], list: &[(String, String)]| {
        list.iter()
            .find(|(key, _)| keys.contains(&key.as_str()))
            .and_then(|(_, value)| parse_count(value))
    };
    let policy = text("ratelimit-policy").map(parameters).unwrap_or_default();
    Some(RateBudget {
        limit: find(&["limit", "q"], &structured).or_else(|| find(&["q"], &policy)),
        remaining: find(&["remaining", "r"], &structured)?,
        reset: find(&["reset", "t"], &structured).map(capped_seconds),
    })
}

/// `key=value` pairs of a structured header, separated by `,` or `;`, keys lower-cased.
fn parameters(value: &str) -> Vec<(String, String)> {
    value
        .split([',', ';'])
        .filter_map(|part| {
            let (key, value) = part.split_once('=')?;
            Some((
                key.trim().to_ascii_lowercase(),
                value.trim().trim_matches('"').to_string(),
            ))
        })
        .collect()
}

/// A non-negative integer; anything else (negative, fractional, absurdly long) is ignored.
fn parse_count(value: &str) -> Option<u64> {
    value.trim().parse::<u64>().ok()
}

fn capped_seconds(seconds: u64) -> Duration {
    Duration::from_secs(seconds.min(MAX_WAIT.as_secs()))
}

/// `X-RateLimit-Reset` is a delay in seconds for some services and a Unix time for others
/// (GitHub): a number larger than any sensible delay is read as a time.
fn parse_reset(value: &str, now: SystemTime) -> Option<Duration> {
    let number = parse_count(value)?;
    const UNIX_TIME_FROM: u64 = 1_000_000_000;
    if number < UNIX_TIME_FROM {
        return Some(capped_seconds(number));
    }
    let now_secs = now.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs();
    Some(capped_seconds(number.saturating_sub(now_secs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    const NOW_SECS: u64 = 1_700_000_000;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(NOW_SECS)
    }

    #[test]
    fn retry_after_accepts_seconds_and_dates_and_caps_both() {
        assert_eq!(
            parse_retry_after("30", now()),
            Some(Duration::from_secs(30))
        );
        let later = httpdate::fmt_http_date(now() + Duration::from_secs(90));
        assert_eq!(
            parse_retry_after(&later, now()),
            Some(Duration::from_secs(90))
        );
        let past = httpdate::fmt_http_date(now() - Duration::from_secs(90));
        assert_eq!(parse_retry_after(&past, now()), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now()), None);
        assert_eq!(parse_retry_after("-5", now()), None);
        assert_eq!(
            parse_retry_after("18446744073709551615", now()),
            Some(MAX_WAIT)
        );
        assert_eq!(
            parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now()),
            Some(MAX_WAIT)
        );
        assert_eq!(parse_retry_after("99999999999999999999999", now()), None);
    }

    #[test]
    fn x_ratelimit_reset_is_a_delay_or_a_unix_time() {
        let delay = rate_budget(
            &headers(&[
                ("x-ratelimit-limit", "100"),
                ("x-ratelimit-remaining", "7"),
                ("x-ratelimit-reset", "30"),
            ]),
            now(),
        );
        assert_eq!(
            delay,
            Some(RateBudget {
                limit: Some(100),
                remaining: 7,
                reset: Some(Duration::from_secs(30)),
            })
        );
        let at = (NOW_SECS + 120).to_string();
        let time = rate_budget(
            &headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", &at)]),
            now(),
        )
        .unwrap();
        assert_eq!(
            (time.limit, time.reset),
            (None, Some(Duration::from_secs(120)))
        );
        let absurd = rate_budget(
            &headers(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "18446744073709551615"),
            ]),
            now(),
        )
        .unwrap();
        assert_eq!(absurd.reset, Some(MAX_WAIT));
    }

    #[test]
    fn draft_headers_and_the_structured_header_are_read() {
        let draft = rate_budget(
            &headers(&[
                ("ratelimit-limit", "10"),
                ("ratelimit-remaining", "2"),
                ("ratelimit-reset", "5"),
            ]),
            now(),
        );
        assert_eq!(
            draft,
            Some(RateBudget {
                limit: Some(10),
                remaining: 2,
                reset: Some(Duration::from_secs(5)),
            })
        );
        let structured = rate_budget(
            &headers(&[
                ("ratelimit", "\"default\";r=3;t=40"),
                ("ratelimit-policy", "\"default\";q=50;w=60"),
            ]),
            now(),
        );
        assert_eq!(
            structured,
            Some(RateBudget {
                limit: Some(50),
                remaining: 3,
                reset: Some(Duration::from_secs(40)),
            })
        );
        let older = rate_budget(
            &headers(&[("ratelimit", "limit=100, remaining=50, reset=30")]),
            now(),
        )
        .unwrap();
        assert_eq!((older.limit, older.remaining), (Some(100), 50));
    }

    #[test]
    fn garbage_and_negative_values_state_no_budget() {
        for pairs in [
            vec![("x-ratelimit-remaining", "-1")],
            vec![("x-ratelimit-remaining", "lots")],
            vec![("ratelimit-remaining", "1.5")],
            vec![("ratelimit", "r=-3")],
            vec![],
        ] {
            assert_eq!(rate_budget(&headers(&pairs), now()), None, "{pairs:?}");
        }
        let negative_reset = rate_budget(
            &headers(&[("ratelimit-remaining", "1"), ("ratelimit-reset", "-5")]),
            now(),
        )
        .unwrap();
        assert_eq!(negative_reset.reset, None);
    }
}
