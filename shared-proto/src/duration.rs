//! Human durations in configuration and API fields: `30s`, `5m`, `1h`, `7d`.

use std::time::Duration;

/// Parses `30s`, `5m`, `1h`, `7d`, `1h30m` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration; write it like 30s, 5m, 1h or 7d".into());
    }
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration ({e}); write it like 30s, 5m, 1h or 7d"))
}

/// The units of an API duration, longest suffix first so that `ms` is not read as `m`.
const UNITS: [(&str, u64); 6] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
    ("", 1_000),
];

/// Parses a duration field of the API: one whole number and at most one unit (`ms`, `s`, `m`,
/// `h`, `d`; none means seconds), no spaces, at most `max`. Stricter than [`parse_duration`]
/// (configuration), so that [`api_duration_pattern`] in the OpenAPI document says exactly what
/// is accepted.
pub fn parse_api_duration(text: &str, max: Duration) -> Result<Duration, String> {
    let hint = "write one number and a unit, like 90s, 30m, 24h or 7d";
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let unit_ms = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|&(_, ms)| ms)
        .filter(|_| !number.is_empty())
        .ok_or_else(|| format!("`{text}` is not a duration; {hint}"))?;
    let too_long = || format!("must be at most {}", humantime::format_duration(max));
    let count: u64 = number.parse().map_err(|_| too_long())?;
    let millis = count.checked_mul(unit_ms).ok_or_else(too_long)?;
    let duration = Duration::from_millis(millis);
    if duration > max {
        return Err(too_long());
    }
    Ok(duration)
}

/// The regular expression (ECMA-262, for OpenAPI `pattern`) of the texts [`parse_api_duration`]
/// accepts for this `max`, zero included or not. Leading zeros are allowed, as the parser
/// allows them.
pub fn api_duration_pattern(max: Duration, zero: bool) -> String {
    let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    let zero = if zero { "0|" } else { "" };
    let alternatives: Vec<String> = UNITS
        .iter()
        .map(|&(unit, unit_ms)| format!("0*(?:{zero}{}){unit}", up_to(max_ms / unit_ms)))
        .collect();
    format!("^(?:{})$", alternatives.join("|"))
}

/// A regular expression matching the decimal numbers 1..=n without leading zeros (`(?!)`, which
/// matches nothing, for n = 0).
fn up_to(n: u64) -> String {
    if n == 0 {
        return "(?!)".into();
    }
    let digits = n.to_string().into_bytes();
    let len = digits.len();
    let mut alternatives = Vec::new();
    if len > 1 {
        alternatives.push(format!("[1-9][0-9]{{0,{}}}", len - 2));
    }
    // Numbers of n's length: n's first i digits, a smaller digit, then anything.
    for i in 0..len {
        let lowest = if i == 0 { b'1' } else { b'0' };
        if digits[i] > lowest {
            let prefix = std::str::from_utf8(&digits[..i]).expect("ascii digits");
            let rest = len - i - 1;
            alternatives.push(format!(
                "{prefix}[{}-{}][0-9]{{{rest}}}",
                lowest as char,
                (digits[i] - 1) as char
            ));
        }
    }
    alternatives.push(n.to_string());
    format!("(?:{})", alternatives.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_accepts_what_the_api_parser_accepts() {
        let max = Duration::from_secs(30 * 86_400);
        let pattern = regex::Regex::new(&api_duration_pattern(max, true)).unwrap();
        let positive = regex::Regex::new(&api_duration_pattern(max, false)).unwrap();
        let mut texts: Vec<String> = ["", "s", "5", "05m", "1h30m", " 5s", "5 s", "-1s", "1.5h"]
            .map(String::from)
            .to_vec();
        for n in (0u64..50)
            .chain([59, 60, 719, 720, 721, 43_199, 43_200, 43_201, 2_592_000])
            .chain([
                2_591_999,
                2_592_001,
                2_592_000_000,
                2_592_000_001,
                99_999_999_999,
            ])
        {
            for (unit, _) in UNITS {
                texts.push(format!("{n}{unit}"));
            }
        }
        for text in texts {
            let parsed = parse_api_duration(&text, max);
            assert_eq!(pattern.is_match(&text), parsed.is_ok(), "`{text}`");
            let is_positive = parsed.is_ok_and(|d| !d.is_zero());
            assert_eq!(positive.is_match(&text), is_positive, "`{text}`");
        }
        assert_eq!(
            parse_api_duration("24h", max),
            Ok(Duration::from_secs(86_400))
        );
        assert_eq!(parse_api_duration("30d", max), Ok(max));
    }

    #[test]
    fn up_to_matches_exactly_one_to_n() {
        for n in [1, 7, 9, 10, 11, 30, 99, 100, 101, 720, 1000, 43_200] {
            let re = regex::Regex::new(&format!("^{}$", up_to(n))).unwrap();
            for k in 0..=(n + 11) {
                assert_eq!(
                    re.is_match(&k.to_string()),
                    (1..=n).contains(&k),
                    "n={n} k={k}"
                );
            }
        }
    }

    #[test]
    fn accepts_the_documented_forms() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86400)
        );
        assert_eq!(parse_duration("45").unwrap(), Duration::from_secs(45));
    }

    #[test]
    fn rejects_garbage_with_a_hint() {
        let err = parse_duration("soon").unwrap_err();
        assert!(err.contains("30s"), "{err}");
        assert!(parse_duration("").is_err());
    }
}
