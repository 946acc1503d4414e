//! The `settings` object of a monitor: keys common to every kind (re-checks, protection
//! tuning) and keys of its kind. Unknown keys are rejected so that a typo does not silently
//! leave a check without the assertion the operator meant.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::health::HealthMapping;
use crate::heartbeat::HeartbeatSettings;
use crate::icmp::IcmpSettings;
use crate::monitor::CheckKind;
use crate::ValidationError;

/// The longest delay any setting lets the engine put between two checks of a monitor (its
/// longest backoff, breaker cooldown or auto-pause): central believes no announced next check
/// further ahead than this.
pub const MAX_DELIBERATE_DELAY_MS: u64 = 86_400_000;

/// Settings of one monitor, parsed and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorSettings {
    pub common: CommonSettings,
    pub check: CheckSettings,
}

impl MonitorSettings {
    pub fn parse(kind: CheckKind, settings: &Map<String, Value>) -> Result<Self, ValidationError> {
        let (common, specific): (Map<String, Value>, Map<String, Value>) = settings
            .clone()
            .into_iter()
            .partition(|(key, _)| CommonSettings::KEYS.contains(&key.as_str()));
        if kind == CheckKind::Heartbeat {
            // No agent runs it: of the common keys only central's own rules apply.
            if let Some(key) = common
                .keys()
                .find(|k| !CommonSettings::CENTRAL_KEYS.contains(&k.as_str()))
            {
                return Err(ValidationError::new(
                    format!("settings.{key}"),
                    format!(
                        "is an agent's setting; a heartbeat monitor takes only {} of the \
                         common keys",
                        CommonSettings::CENTRAL_KEYS.join(", ")
                    ),
                ));
            }
        }
        let common: CommonSettings = from_settings(Value::Object(common))?;
        common.validate()?;
        let specific = Value::Object(specific);
        let check = match kind {
            CheckKind::Http => {
                let s: HttpSettings = from_settings(specific)?;
                s.validate()?;
                CheckSettings::Http(s)
            }
            CheckKind::Tcp => CheckSettings::Tcp(from_settings(specific)?),
            CheckKind::Dns => {
                let s: DnsSettings = from_settings(specific)?;
                s.validate()?;
                CheckSettings::Dns(s)
            }
            CheckKind::Tls => CheckSettings::Tls(from_settings(specific)?),
            CheckKind::Icmp => {
                let s: IcmpSettings = from_settings(specific)?;
                s.validate()?;
                CheckSettings::Icmp(s)
            }
            CheckKind::Heartbeat => {
                let s: HeartbeatSettings = from_settings(specific)?;
                s.validate()?;
                CheckSettings::Heartbeat(s)
            }
        };
        Ok(MonitorSettings { common, check })
    }
}

fn from_settings<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ValidationError> {
    crate::lenient::from_value(value).map_err(|e| ValidationError::new("settings", e.to_string()))
}

fn range_check<T: PartialOrd + std::fmt::Display + Copy>(
    field: &str,
    value: T,
    min: T,
    max: T,
) -> Result<(), ValidationError> {
    if value < min || value > max {
        return Err(ValidationError::new(
            format!("settings.{field}"),
            format!("must be between {min} and {max}, got {value}"),
        ));
    }
    Ok(())
}

/// Keys every kind accepts: down confirmation, backoff, circuit breaker, auto-pause, dead letter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct CommonSettings {
    /// Re-checks after a failure before backoff takes over.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 10))]
    pub retries: u32,
    #[cfg_attr(feature = "openapi", schema(minimum = 1000, maximum = 300000))]
    pub retry_interval_ms: u64,
    /// Consecutive failing results central needs before it calls the monitor down.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 20))]
    pub confirm_down: u32,
    /// Consecutive passing results central needs before a down monitor is up again (resolved).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 20))]
    pub confirm_up: u32,
    /// While down (or degraded, or stale), notify again this often; 0 sends one notification.
    pub repeat_interval_ms: u64,
    #[cfg_attr(feature = "openapi", schema(minimum = 100, maximum = 3600000))]
    pub backoff_base_ms: u64,
    /// The longest wait between checks of a failing target; 0 (the default) is the
    /// monitor's interval, so that a recovery is seen within one interval. Longer waits are
    /// for polling APIs that must not be hammered: a recovery may then be seen this late.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 86400000))]
    pub backoff_max_ms: u64,
    /// Consecutive failures that open the circuit breaker (no checks for
    /// `breaker_cooldown_ms`, then one probe); 0 (the default) never opens it.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 10000))]
    pub breaker_threshold: u32,
    #[cfg_attr(feature = "openapi", schema(minimum = 1000, maximum = 86400000))]
    pub breaker_cooldown_ms: u64,
    /// Results in the rolling success-rate window.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub window: u32,
    /// Auto-pause (no checks for `auto_pause_cooldown_ms`) when the full window's success
    /// rate falls below this; 0 (the default) never pauses.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1))]
    pub auto_pause_threshold: f64,
    /// Resume only once a probe lifts the rate to this (at least the pause threshold).
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1))]
    pub auto_resume_threshold: f64,
    #[cfg_attr(feature = "openapi", schema(minimum = 1000, maximum = 86400000))]
    pub auto_pause_cooldown_ms: u64,
    /// Consecutive failures that move the monitor to the dead-letter state (rechecked every
    /// 30 minutes; a permanent error, such as a refused credential, at once); 0 (the
    /// default) never does.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000000))]
    pub dead_letter_after: u32,
    /// When a target's stated rate-limit budget falls below this share of its limit (or to
    /// zero), checks are spaced out until it resets (0 disables).
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1))]
    pub rate_limit_reserve: f64,
    /// Stretch the interval of a stable target, shrink it back when the target changes or fails.
    pub adaptive: bool,
    /// The longest adaptive interval; 0 means the longest central tolerates
    /// (`interval + staleness grace`), and it is never allowed beyond that.
    pub adaptive_max_interval_ms: u64,
}

impl Default for CommonSettings {
    fn default() -> Self {
        Self {
            retries: 0,
            retry_interval_ms: 5_000,
            confirm_down: 1,
            confirm_up: 1,
            repeat_interval_ms: 0,
            backoff_base_ms: 1_000,
            // The protections that wait longer than an interval are for polling APIs, which
            // opt into them: for uptime, a recovery must be seen within one interval.
            backoff_max_ms: 0,
            breaker_threshold: 0,
            breaker_cooldown_ms: 300_000,
            window: 20,
            auto_pause_threshold: 0.0,
            auto_resume_threshold: 0.5,
            // Short, so that a recovered target is back to its interval within minutes.
            auto_pause_cooldown_ms: 120_000,
            dead_letter_after: 0,
            rate_limit_reserve: 0.1,
            adaptive: false,
            adaptive_max_interval_ms: 0,
        }
    }
}

/// The longest a target's own numbers (`Retry-After`, a rate-limit reset) may space checks
/// out when the monitor sets no `backoff_max_ms`: the target asked, so it is obeyed, within
/// this bound.
pub const DEFAULT_TARGET_WAIT_CAP_MS: u64 = 300_000;

/// How long a dead letter waits between rechecks (agents' engine).
pub const DEAD_LETTER_RECHECK_MS: u64 = 30 * 60 * 1_000;

impl CommonSettings {
    /// The longest wait between checks of a failing target: `backoff_max_ms`, or the
    /// monitor's interval when it is 0 (the default).
    pub fn backoff_max_ms_for(&self, interval_ms: u64) -> u64 {
        if self.backoff_max_ms == 0 {
            interval_ms
        } else {
            self.backoff_max_ms
        }
    }

    /// The longest an `up` result may wait for the next check: the interval, or with
    /// `adaptive` the longest stretched interval (`adaptive_max_interval_ms`, at most the
    /// interval plus the staleness grace; the agent's `engine::adaptive` clamps the same way).
    pub fn longest_interval_ms(&self, interval_ms: u64) -> u64 {
        if !self.adaptive {
            return interval_ms;
        }
        let ceiling = interval_ms.saturating_add(crate::monitor::staleness_grace_ms(interval_ms));
        match self.adaptive_max_interval_ms {
            0 => ceiling,
            max => max.min(ceiling).max(interval_ms),
        }
    }

    /// The longest a target's `Retry-After` or rate-limit reset may space checks out.
    pub fn target_wait_cap_ms(&self) -> u64 {
        if self.backoff_max_ms == 0 {
            DEFAULT_TARGET_WAIT_CAP_MS
        } else {
            self.backoff_max_ms
        }
    }

    /// How long a failing target may go unchecked because of the protections this monitor
    /// opted into (a longer backoff, the breaker, auto-pause, dead letters), when that is
    /// longer than its interval: a recovery may be seen this late. `None` with the defaults.
    pub fn recovery_late_by_ms(&self, interval_ms: u64) -> Option<u64> {
        let longest = [
            Some(self.backoff_max_ms_for(interval_ms)),
            (self.breaker_threshold > 0).then_some(self.breaker_cooldown_ms),
            (self.auto_pause_threshold > 0.0).then_some(self.auto_pause_cooldown_ms),
            (self.dead_letter_after > 0).then_some(DEAD_LETTER_RECHECK_MS),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(interval_ms);
        (longest > interval_ms).then_some(longest)
    }

    /// The common keys central applies itself (the others tune the agent's engine).
    pub const CENTRAL_KEYS: [&'static str; 3] =
        ["confirm_down", "confirm_up", "repeat_interval_ms"];

    pub const KEYS: [&'static str; 17] = [
        "retries",
        "retry_interval_ms",
        "confirm_down",
        "confirm_up",
        "repeat_interval_ms",
        "backoff_base_ms",
        "backoff_max_ms",
        "breaker_threshold",
        "breaker_cooldown_ms",
        "window",
        "auto_pause_threshold",
        "auto_resume_threshold",
        "auto_pause_cooldown_ms",
        "dead_letter_after",
        "rate_limit_reserve",
        "adaptive",
        "adaptive_max_interval_ms",
    ];

    fn validate(&self) -> Result<(), ValidationError> {
        range_check("retries", self.retries, 0, 10)?;
        range_check("retry_interval_ms", self.retry_interval_ms, 1_000, 300_000)?;
        range_check("confirm_down", self.confirm_down, 1, 20)?;
        range_check("confirm_up", self.confirm_up, 1, 20)?;
        if self.repeat_interval_ms != 0 {
            range_check(
                "repeat_interval_ms",
                self.repeat_interval_ms,
                60_000,
                7 * 86_400_000,
            )?;
        }
        range_check("backoff_base_ms", self.backoff_base_ms, 100, 3_600_000)?;
        if self.backoff_max_ms != 0 {
            range_check(
                "backoff_max_ms",
                self.backoff_max_ms,
                100,
                MAX_DELIBERATE_DELAY_MS,
            )?;
        }
        if self.backoff_max_ms != 0 && self.backoff_max_ms < self.backoff_base_ms {
            return Err(ValidationError::combination(
                "settings.backoff_max_ms",
                format!(
                    "must be at least settings.backoff_base_ms ({}), got {}",
                    self.backoff_base_ms, self.backoff_max_ms
                ),
            ));
        }
        range_check("breaker_threshold", self.breaker_threshold, 0, 10_000)?;
        range_check(
            "breaker_cooldown_ms",
            self.breaker_cooldown_ms,
            1_000,
            MAX_DELIBERATE_DELAY_MS,
        )?;
        range_check("window", self.window, 1, 1_000)?;
        range_check("auto_pause_threshold", self.auto_pause_threshold, 0.0, 1.0)?;
        range_check(
            "auto_resume_threshold",
            self.auto_resume_threshold,
            0.0,
            1.0,
        )?;
        if self.auto_resume_threshold < self.auto_pause_threshold {
            return Err(ValidationError::combination(
                "settings.auto_resume_threshold",
                format!(
                    "must be at least settings.auto_pause_threshold ({}), got {}",
                    self.auto_pause_threshold, self.auto_resume_threshold
                ),
            ));
        }
        range_check(
            "auto_pause_cooldown_ms",
            self.auto_pause_cooldown_ms,
            1_000,
            MAX_DELIBERATE_DELAY_MS,
        )?;
        range_check("dead_letter_after", self.dead_letter_after, 0, 1_000_000)?;
        range_check("rate_limit_reserve", self.rate_limit_reserve, 0.0, 1.0)?;
        if self.adaptive_max_interval_ms != 0 {
            range_check(
                "adaptive_max_interval_ms",
                self.adaptive_max_interval_ms,
                crate::monitor::MIN_INTERVAL_MS,
                2 * crate::monitor::MAX_INTERVAL_MS,
            )?;
        }
        Ok(())
    }
}

/// Settings of each kind.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckSettings {
    Http(HttpSettings),
    Tcp(TcpSettings),
    Dns(DnsSettings),
    Tls(TlsSettings),
    Icmp(IcmpSettings),
    Heartbeat(HeartbeatSettings),
}

pub const HTTP_METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

fn default_method() -> String {
    "GET".into()
}
fn yes() -> bool {
    true
}

/// How an `http` check reads the response body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum BodyFormat {
    /// Status code and optional keyword / JSON assertions.
    #[default]
    Plain,
    /// A health document listing dependencies; see docs/health-json.md.
    HealthJson,
}

/// Settings of an `http` check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    #[serde(default = "default_method")]
    pub method: String,
    /// Accepted status codes; empty means any 2xx.
    #[serde(default)]
    pub expected_status: Vec<u16>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub body: Option<String>,
    /// The response body must contain this text.
    #[serde(default)]
    pub keyword: Option<String>,
    /// The response body must not contain this text.
    #[serde(default)]
    pub keyword_absent: Option<String>,
    /// A JSON pointer (RFC 6901, e.g. `/status`) into the response body…
    #[serde(default)]
    pub json_path: Option<String>,
    /// …whose value must equal this.
    #[serde(default)]
    pub json_expected: Option<Value>,
    #[serde(default = "yes")]
    pub follow_redirects: bool,
    #[serde(default = "yes")]
    pub verify_tls: bool,
    /// Send `If-None-Match` / `If-Modified-Since` from the previous answer; `304` counts as up.
    #[serde(default)]
    pub conditional: bool,
    #[serde(default)]
    pub format: BodyFormat,
    /// Where a `health-json` document's dependencies are and how to read them, when it is not
    /// in the default shape (docs/health-json.md).
    #[serde(default)]
    pub health_mapping: Option<Box<HealthMapping>>,
    /// Notify the monitor's channels when a dependency its health document lists fails
    /// (`dependency.down`) or recovers (`dependency.up`).
    #[serde(default)]
    pub notify_dependencies: bool,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            method: default_method(),
            expected_status: Vec::new(),
            headers: BTreeMap::new(),
            body: None,
            keyword: None,
            keyword_absent: None,
            json_path: None,
            json_expected: None,
            follow_redirects: true,
            verify_tls: true,
            conditional: false,
            format: BodyFormat::Plain,
            health_mapping: None,
            notify_dependencies: false,
        }
    }
}

impl HttpSettings {
    fn validate(&self) -> Result<(), ValidationError> {
        if !HTTP_METHODS.contains(&self.method.as_str()) {
            return Err(ValidationError::new(
                "settings.method",
                format!(
                    "`{}` is not a supported method; use one of {}",
                    self.method,
                    HTTP_METHODS.join(", ")
                ),
            ));
        }
        if let Some(code) = self
            .expected_status
            .iter()
            .find(|c| !(100..=599).contains(*c))
        {
            return Err(ValidationError::new(
                "settings.expected_status",
                format!("{code} is not an HTTP status code; use codes between 100 and 599"),
            ));
        }
        check_header_map("settings.headers", &self.headers)?;
        if let Some(mapping) = &self.health_mapping {
            mapping.validate()?;
        }
        for (field, set) in [
            ("settings.health_mapping", self.health_mapping.is_some()),
            ("settings.notify_dependencies", self.notify_dependencies),
        ] {
            if set && self.format != BodyFormat::HealthJson {
                return Err(ValidationError::combination(
                    field,
                    "is about a health document's dependencies: set settings.format to \
                     health-json too",
                ));
            }
        }
        match (&self.json_path, &self.json_expected) {
            (Some(path), _) if !(path.is_empty() || path.starts_with('/')) => {
                Err(ValidationError::new(
                    "settings.json_path",
                    format!(
                        "`{path}` is not a JSON pointer; write it like /status or /checks/0/ok"
                    ),
                ))
            }
            (None, Some(_)) => Err(ValidationError::combination(
                "settings.json_path",
                "is required when settings.json_expected is set",
            )),
            _ => Ok(()),
        }
    }

    /// Whether `status` counts as success.
    pub fn accepts(&self, status: u16) -> bool {
        if self.expected_status.is_empty() {
            (200..300).contains(&status)
        } else {
            self.expected_status.contains(&status)
        }
    }
}

/// An HTTP header name: an RFC 9110 token (what the OpenAPI document's `propertyNames` pattern
/// for headers states).
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Headers one request may carry beside its own.
pub const MAX_HEADERS: usize = 20;
/// The longest header value, in bytes.
pub const MAX_HEADER_VALUE_LEN: usize = 4096;

/// A map of extra HTTP headers: at most [`MAX_HEADERS`], token names, printable values (a
/// line break in a value would end the header). What the OpenAPI document's `headers`
/// schemas state (`maxProperties`, `propertyNames`, the value pattern).
pub fn check_header_map(
    field: &str,
    headers: &BTreeMap<String, String>,
) -> Result<(), ValidationError> {
    if headers.len() > MAX_HEADERS {
        return Err(ValidationError::new(
            field,
            format!("at most {MAX_HEADERS} headers"),
        ));
    }
    for (name, value) in headers {
        if !is_header_name(name) {
            return Err(ValidationError::new(
                field,
                format!("`{name}` is not a valid header name"),
            ));
        }
        if value.bytes().any(|b| b.is_ascii_control() && b != b'\t')
            || value.len() > MAX_HEADER_VALUE_LEN
        {
            return Err(ValidationError::new(
                field,
                format!(
                    "the value of `{name}` must be printable and at most \
                     {MAX_HEADER_VALUE_LEN} bytes"
                ),
            ));
        }
    }
    Ok(())
}

/// Settings of a `tcp` check (none beyond the common ones).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TcpSettings {}

pub const DNS_RECORD_TYPES: [&str; 7] = ["A", "AAAA", "CNAME", "MX", "NS", "TXT", "SOA"];

fn default_record_type() -> String {
    "A".into()
}

/// Settings of a `dns` check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DnsSettings {
    #[serde(default = "default_record_type")]
    pub record_type: String,
    /// Each of these must be among the answers (empty: any answer will do).
    #[serde(default)]
    pub expected: Vec<String>,
    /// `ip:port` of the server to ask; the system resolver when unset.
    #[serde(default)]
    pub nameserver: Option<String>,
}

impl Default for DnsSettings {
    fn default() -> Self {
        Self {
            record_type: default_record_type(),
            expected: Vec::new(),
            nameserver: None,
        }
    }
}

impl DnsSettings {
    fn validate(&self) -> Result<(), ValidationError> {
        if !DNS_RECORD_TYPES.contains(&self.record_type.as_str()) {
            return Err(ValidationError::new(
                "settings.record_type",
                format!(
                    "`{}` is not supported; use one of {}",
                    self.record_type,
                    DNS_RECORD_TYPES.join(", ")
                ),
            ));
        }
        if let Some(server) = &self.nameserver {
            if !crate::target::matches_nameserver(server) {
                return Err(ValidationError::new(
                    "settings.nameserver",
                    format!("`{server}` must be ip:port, like 1.1.1.1:53 or [2001:db8::53]:53"),
                ));
            }
            if server.parse::<std::net::SocketAddr>().is_err() {
                return Err(ValidationError::value(
                    "settings.nameserver",
                    format!("`{server}` is not an IP address and port"),
                ));
            }
        }
        Ok(())
    }
}

fn default_warn_days() -> u32 {
    14
}

/// Settings of a `tls` check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TlsSettings {
    /// Down when the certificate expires within this many days.
    #[serde(default = "default_warn_days")]
    pub warn_days: u32,
    /// Verify the chain against the Mozilla root certificates built into the agent.
    #[serde(default = "yes")]
    pub verify: bool,
    /// SNI name when it differs from the target host.
    #[serde(default)]
    pub server_name: Option<String>,
}

impl Default for TlsSettings {
    fn default() -> Self {
        Self {
            warn_days: default_warn_days(),
            verify: true,
            server_name: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(kind: CheckKind, settings: Value) -> Result<MonitorSettings, ValidationError> {
        MonitorSettings::parse(kind, settings.as_object().unwrap())
    }

    #[test]
    fn a_heartbeat_takes_only_the_common_keys_central_applies() {
        let refused = parse(CheckKind::Heartbeat, json!({"retries": 2})).unwrap_err();
        assert_eq!(refused.field, "settings.retries");
        let kept = parse(
            CheckKind::Heartbeat,
            json!({"confirm_down": 2, "grace_ms": 5000, "cron": "0 3 * * *"}),
        )
        .unwrap();
        assert_eq!(kept.common.confirm_down, 2);
        assert!(matches!(kept.check, CheckSettings::Heartbeat(h) if h.grace_ms == 5000));
    }

    #[test]
    fn common_keys_work_for_every_kind_agents_run() {
        for kind in CheckKind::AGENT_KINDS {
            let s = parse(kind, json!({"retries": 2, "breaker_threshold": 3})).unwrap();
            assert_eq!((s.common.retries, s.common.breaker_threshold), (2, 3));
        }
    }

    #[test]
    fn bad_common_values_name_the_field() {
        let cases = [
            (json!({"retries": 11}), "settings.retries"),
            (
                json!({"retry_interval_ms": 10}),
                "settings.retry_interval_ms",
            ),
            (
                json!({"auto_pause_threshold": 0.6, "auto_resume_threshold": 0.5}),
                "settings.auto_resume_threshold",
            ),
            (
                json!({"backoff_base_ms": 5000, "backoff_max_ms": 1000}),
                "settings.backoff_max_ms",
            ),
            (json!({"window": 0}), "settings.window"),
        ];
        // An integral float is the integer (JSON Schema's reading); a fraction is not.
        assert_eq!(
            parse(CheckKind::Tcp, json!({"window": 65.0}))
                .unwrap()
                .common
                .window,
            65
        );
        assert_eq!(
            parse(CheckKind::Tcp, json!({"window": 6.5}))
                .unwrap_err()
                .field,
            "settings"
        );
        for (settings, field) in cases {
            assert_eq!(
                parse(CheckKind::Tcp, settings.clone()).unwrap_err().field,
                field,
                "{settings}"
            );
        }
    }

    #[test]
    fn kind_specific_keys_are_checked() {
        assert_eq!(
            parse(CheckKind::Dns, json!({"record_type": "XX"}))
                .unwrap_err()
                .field,
            "settings.record_type"
        );
        assert_eq!(
            parse(CheckKind::Dns, json!({"nameserver": "dns"}))
                .unwrap_err()
                .field,
            "settings.nameserver"
        );
        assert_eq!(
            parse(CheckKind::Http, json!({"json_path": "status"}))
                .unwrap_err()
                .field,
            "settings.json_path"
        );
        assert_eq!(
            parse(CheckKind::Http, json!({"json_expected": 1}))
                .unwrap_err()
                .field,
            "settings.json_path"
        );
        let tcp_with_http_key = parse(CheckKind::Tcp, json!({"keyword": "x"})).unwrap_err();
        assert!(
            tcp_with_http_key.message.contains("keyword"),
            "{}",
            tcp_with_http_key.message
        );
        let http = parse(
            CheckKind::Http,
            json!({"format": "health-json", "conditional": true}),
        )
        .unwrap();
        assert!(matches!(
            http.check,
            CheckSettings::Http(HttpSettings {
                format: BodyFormat::HealthJson,
                conditional: true,
                ..
            })
        ));
    }
}
