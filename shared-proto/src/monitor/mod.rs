//! What a monitor is: the operator's spec, the agent's view of it, and the rules for both.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::settings::MonitorSettings;
use crate::tags::{validate_tags, MAX_MONITOR_TAGS};
pub use crate::target::split_host_port;
use crate::target::{validate_target, validate_target_length};
use crate::ValidationError;

pub(crate) mod rules;
pub use rules::{
    has_control, is_blank, validate_interval, validate_label, validate_name, validate_timeout,
};
use rules::{validate_locations, validate_placement, validate_region_list, validate_timeout_range};

pub const MIN_INTERVAL_MS: u64 = 5_000;
pub const MAX_INTERVAL_MS: u64 = 3_600_000;
pub const DEFAULT_INTERVAL_MS: u64 = 30_000;
pub const MIN_TIMEOUT_MS: u64 = 100;
pub const MAX_TIMEOUT_MS: u64 = 120_000;
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
const MAX_NAME_LEN: usize = 200;
/// A multi-location monitor runs in at most this many regions.
pub const MAX_LOCATIONS: usize = 16;
/// Channels one monitor may list (beside the default ones).
const MAX_CHANNELS: usize = 20;

/// How long past its expected time a monitor's next result may be before central calls the
/// monitor `stale`: an interval, and at least a minute (uploads are batched). The agent never
/// stretches an interval (adaptive polling) beyond `interval + grace`, so a stretched monitor
/// is never mistaken for a silent one.
pub fn staleness_grace_ms(interval_ms: u64) -> u64 {
    interval_ms.max(60_000)
}
const MAX_LABEL_LEN: usize = 64;
/// What [`validate_label`] accepts, for the OpenAPI document (whose `pattern = "…"` attributes
/// must spell it out as a literal).
pub const LABEL_PATTERN: &str = r"^[A-Za-z0-9._-]{1,64}$";

/// The built-in check kinds. Those agents run (`AGENT_KINDS`) are also poller capabilities of
/// the same name; a `heartbeat` is answered by central itself (`crate::heartbeat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum CheckKind {
    Http,
    Tcp,
    Dns,
    Tls,
    Icmp,
    Heartbeat,
}

impl CheckKind {
    pub const ALL: [CheckKind; 6] = [
        CheckKind::Http,
        CheckKind::Tcp,
        CheckKind::Dns,
        CheckKind::Tls,
        CheckKind::Icmp,
        CheckKind::Heartbeat,
    ];

    /// The kinds agents run: their capabilities. An agent never gets another kind (an older
    /// agent could not read it).
    pub const AGENT_KINDS: [CheckKind; 5] = [
        CheckKind::Http,
        CheckKind::Tcp,
        CheckKind::Dns,
        CheckKind::Tls,
        CheckKind::Icmp,
    ];

    /// Whether agents run it (else central answers it: `heartbeat`).
    pub fn runs_on_agents(self) -> bool {
        self != CheckKind::Heartbeat
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CheckKind::Http => "http",
            CheckKind::Tcp => "tcp",
            CheckKind::Dns => "dns",
            CheckKind::Tls => "tls",
            CheckKind::Icmp => "icmp",
            CheckKind::Heartbeat => "heartbeat",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

impl std::fmt::Display for CheckKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How central chooses the poller of a monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum PollerMode {
    /// Any online poller with the capability.
    #[default]
    Auto,
    /// Pollers of `poller_region` (and `poller_datacenter`, if set).
    Grouped,
    /// Exactly `poller_id`.
    Pinned,
    /// One poller in each of `poller_regions`, their verdicts combined by `quorum`.
    Multi,
}

impl PollerMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PollerMode::Auto => "auto",
            PollerMode::Grouped => "grouped",
            PollerMode::Pinned => "pinned",
            PollerMode::Multi => "multi",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            PollerMode::Auto,
            PollerMode::Grouped,
            PollerMode::Pinned,
            PollerMode::Multi,
        ]
        .into_iter()
        .find(|m| m.as_str() == text)
    }
}

fn default_interval() -> u64 {
    DEFAULT_INTERVAL_MS
}
fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_MS
}

/// A monitor as the operator writes it (`POST /api/v1/monitors`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MonitorSpec {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: String,
    pub kind: CheckKind,
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 2048))]
    pub target: String,
    #[serde(default = "default_interval")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 5000, maximum = 3600000, default = 30000)
    )]
    pub interval_ms: u64,
    #[serde(default = "default_timeout")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 100, maximum = 120000, default = 5000)
    )]
    pub timeout_ms: u64,
    #[serde(default)]
    pub settings: Map<String, Value>,
    #[serde(default)]
    pub poller_mode: PollerMode,
    #[serde(default)]
    pub poller_id: Option<Uuid>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub poller_region: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub poller_datacenter: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub poller_capability: Option<String>,
    /// For `multi`: the regions to check from, one poller in each (two or more).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(min_items = 2, max_items = 16))]
    pub poller_regions: Option<Vec<String>>,
    /// For `multi`: how many locations must see the target down for the monitor to be
    /// `down`; fewer make it `degraded`. Defaults to a majority of the regions.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 16))]
    pub quorum: Option<u32>,
    /// Defaults to `true` for `auto`, `grouped` and `multi`, `false` for `pinned`.
    #[serde(default)]
    pub failover: Option<bool>,
    #[serde(default)]
    pub paused: bool,
    /// Channels told of this monitor's status changes, beside the default channels.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub notification_channel_ids: Vec<Uuid>,
    /// The operator's labels (`team:db`, `env:prod`): the list filters by them, and
    /// maintenance windows, notification channels and pause/resume can target them.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub tags: Vec<String>,
    /// Monitors this one depends on (a switch, the database): while one of them is down,
    /// degraded, stale or in maintenance, this monitor's own problems are not told (the
    /// parent's notice names what depends on it); what still fails when they recover is.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub parent_ids: Vec<Uuid>,
}

impl MonitorSpec {
    /// Checks every field; the first failure names the field and how to fix it.
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_name(&self.name)?;
        validate_target(self.kind, &self.target)?;
        validate_interval(self.interval_ms)?;
        validate_timeout(self.timeout_ms, self.interval_ms)?;
        // Which settings exist, and their ranges, depend on the kind (each kind's schema in
        // the OpenAPI document states them).
        let settings = MonitorSettings::parse(self.kind, &self.settings)?;
        if let crate::settings::CheckSettings::Icmp(icmp) = &settings.check {
            let longest = icmp.longest_check_ms(self.timeout_ms);
            if longest > self.interval_ms {
                return Err(ValidationError::combination(
                    "settings.count",
                    format!(
                        "{} echoes {} ms apart and the last one's timeout take {longest} ms, \
                         longer than interval_ms ({})",
                        icmp.count, icmp.echo_interval_ms, self.interval_ms
                    ),
                ));
            }
        }
        validate_placement(
            self.poller_mode,
            self.poller_id,
            self.poller_region.as_deref(),
            self.poller_datacenter.as_deref(),
        )?;
        validate_locations(
            self.poller_mode,
            self.poller_regions.as_deref(),
            self.quorum,
        )?;
        if let Some(capability) = &self.poller_capability {
            validate_label("poller_capability", capability)?;
        }
        if self.notification_channel_ids.len() > MAX_CHANNELS {
            return Err(too_many_channels());
        }
        validate_tags("tags", &self.tags, MAX_MONITOR_TAGS)?;
        validate_parents(&self.parent_ids)?;
        Ok(())
    }

    pub fn effective_failover(&self) -> bool {
        self.failover
            .unwrap_or(self.poller_mode != PollerMode::Pinned)
    }

    /// How many locations must agree on `down`: the set quorum, else a majority.
    pub fn effective_quorum(&self) -> u32 {
        let regions = self.poller_regions.as_ref().map_or(1, Vec::len) as u32;
        self.quorum.unwrap_or(regions / 2 + 1)
    }

    /// Applies a partial update; the caller validates the result.
    pub fn apply(&mut self, patch: MonitorPatch) {
        let MonitorPatch {
            name,
            target,
            interval_ms,
            timeout_ms,
            settings,
            poller_mode,
            poller_id,
            poller_region,
            poller_datacenter,
            poller_capability,
            poller_regions,
            quorum,
            failover,
            paused,
            notification_channel_ids,
            tags,
            parent_ids,
        } = patch;
        if let Some(v) = name {
            self.name = v;
        }
        if let Some(v) = target {
            self.target = v;
        }
        if let Some(v) = interval_ms {
            self.interval_ms = v;
        }
        if let Some(v) = timeout_ms {
            self.timeout_ms = v;
        }
        if let Some(v) = settings {
            self.settings = v;
        }
        if let Some(v) = poller_mode {
            self.poller_mode = v;
        }
        if let Some(v) = poller_id {
            self.poller_id = v;
        }
        if let Some(v) = poller_region {
            self.poller_region = v;
        }
        if let Some(v) = poller_datacenter {
            self.poller_datacenter = v;
        }
        if let Some(v) = poller_capability {
            self.poller_capability = v;
        }
        if let Some(v) = poller_regions {
            self.poller_regions = v;
        }
        if let Some(v) = quorum {
            self.quorum = v;
        }
        if let Some(v) = failover {
            self.failover = Some(v);
        }
        if let Some(v) = paused {
            self.paused = v;
        }
        if let Some(v) = notification_channel_ids {
            self.notification_channel_ids = v;
        }
        if let Some(v) = tags {
            self.tags = v;
        }
        if let Some(v) = parent_ids {
            self.parent_ids = v;
        }
    }
}

/// `PATCH /api/v1/monitors/{id}`: every field optional; `null` clears an optional field.
/// The kind of a monitor cannot change: create a new monitor instead.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MonitorPatch {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: Option<String>,
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 2048))]
    pub target: Option<String>,
    #[cfg_attr(feature = "openapi", schema(minimum = 5000, maximum = 3600000))]
    pub interval_ms: Option<u64>,
    #[cfg_attr(feature = "openapi", schema(minimum = 100, maximum = 120000))]
    pub timeout_ms: Option<u64>,
    pub settings: Option<Map<String, Value>>,
    pub poller_mode: Option<PollerMode>,
    #[serde(default, with = "double_option")]
    pub poller_id: Option<Option<Uuid>>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub poller_region: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub poller_datacenter: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub poller_capability: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(min_items = 2, max_items = 16))]
    pub poller_regions: Option<Option<Vec<String>>>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 16))]
    pub quorum: Option<Option<u32>>,
    pub failover: Option<bool>,
    pub paused: Option<bool>,
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub notification_channel_ids: Option<Vec<Uuid>>,
    /// Replaces the monitor's tags (`[]` removes them all).
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub tags: Option<Vec<String>>,
    /// Replaces the monitor's parents (`[]` removes them all).
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub parent_ids: Option<Vec<Uuid>>,
}

impl MonitorPatch {
    /// The rules of each field on its own, as the document's `MonitorPatch` schema states
    /// them. Whether the patched monitor holds together (a target of its kind, settings of
    /// its kind, a timeout within its interval) is `MonitorSpec::validate`'s, on the result.
    pub fn validate_fields(&self) -> Result<(), ValidationError> {
        if let Some(name) = &self.name {
            validate_name(name)?;
        }
        if let Some(target) = &self.target {
            validate_target_length(target)?;
        }
        if let Some(interval_ms) = self.interval_ms {
            validate_interval(interval_ms)?;
        }
        if let Some(timeout_ms) = self.timeout_ms {
            validate_timeout_range(timeout_ms)?;
        }
        let labels = [
            ("poller_region", &self.poller_region),
            ("poller_datacenter", &self.poller_datacenter),
            ("poller_capability", &self.poller_capability),
        ];
        for (field, value) in labels {
            if let Some(Some(value)) = value {
                validate_label(field, value)?;
            }
        }
        if let Some(Some(regions)) = &self.poller_regions {
            validate_region_list(regions)?;
        }
        if let Some(Some(quorum)) = self.quorum {
            if !(1..=MAX_LOCATIONS as u32).contains(&quorum) {
                return Err(ValidationError::new(
                    "quorum",
                    format!("must be between 1 and {MAX_LOCATIONS}, got {quorum}"),
                ));
            }
        }
        if self
            .notification_channel_ids
            .as_ref()
            .is_some_and(|ids| ids.len() > MAX_CHANNELS)
        {
            return Err(too_many_channels());
        }
        if let Some(tags) = &self.tags {
            validate_tags("tags", tags, MAX_MONITOR_TAGS)?;
        }
        if let Some(parents) = &self.parent_ids {
            validate_parents(parents)?;
        }
        Ok(())
    }
}

/// The most parents one monitor names.
pub const MAX_PARENTS: usize = 20;

/// At most `MAX_PARENTS`, none twice. That they exist, are not the monitor itself and make no
/// cycle is central's to check.
fn validate_parents(parents: &[Uuid]) -> Result<(), ValidationError> {
    if parents.len() > MAX_PARENTS {
        return Err(ValidationError::new(
            "parent_ids",
            format!("at most {MAX_PARENTS} parents"),
        ));
    }
    if let Some((_, twice)) = parents
        .iter()
        .enumerate()
        .find(|(i, id)| parents[..*i].contains(id))
    {
        return Err(ValidationError::new(
            "parent_ids",
            format!("{twice} is listed twice"),
        ));
    }
    Ok(())
}

fn too_many_channels() -> ValidationError {
    ValidationError::new(
        "notification_channel_ids",
        format!(
            "at most {MAX_CHANNELS} channels; make a channel the default to reach every monitor"
        ),
    )
}

/// Distinguishes a missing field (`None`) from an explicit `null` (`Some(None)`).
pub(crate) mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            None => serializer.serialize_none(),
            Some(inner) => inner.serialize(serializer),
        }
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(deserializer).map(Some)
    }
}

/// A monitor as its agent sees it in an assignment: only what is needed to run the check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AssignedMonitor {
    pub id: Uuid,
    pub name: String,
    pub kind: CheckKind,
    pub target: String,
    pub interval_ms: u64,
    pub timeout_ms: u64,
    #[serde(default)]
    pub settings: Map<String, Value>,
    /// Assignment version at which this monitor's spec last changed.
    pub revision: i64,
    /// When in its interval to check, in ms past each UTC multiple of the interval. Set for the
    /// locations of a multi-location monitor, each a different share of the interval, so that
    /// its checks from several places are spread out rather than fired together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(value: Value) -> Result<MonitorSpec, String> {
        serde_json::from_value::<MonitorSpec>(value).map_err(|e| e.to_string())
    }

    fn http_monitor() -> Value {
        json!({"name": "api", "kind": "http", "target": "https://example.com/health"})
    }

    fn field_of(value: Value) -> String {
        spec(value).unwrap().validate().unwrap_err().field
    }

    fn with(mut base: Value, key: &str, value: Value) -> Value {
        base[key] = value;
        base
    }

    #[test]
    fn a_minimal_http_monitor_is_valid_with_defaults() {
        let monitor = spec(http_monitor()).unwrap();
        monitor.validate().unwrap();
        assert_eq!(monitor.interval_ms, DEFAULT_INTERVAL_MS);
        assert_eq!(monitor.poller_mode, PollerMode::Auto);
        assert!(monitor.effective_failover());
    }

    #[test]
    fn interval_bounds_are_enforced() {
        let err = spec(with(http_monitor(), "interval_ms", json!(10)))
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(err.field, "interval_ms");
        assert!(err.message.contains("5000"), "{}", err.message);
        assert_eq!(
            field_of(with(http_monitor(), "interval_ms", json!(3_600_001))),
            "interval_ms"
        );
        let ok = with(http_monitor(), "interval_ms", json!(5000));
        spec(ok).unwrap().validate().unwrap();
    }

    #[test]
    fn timeout_must_fit_the_interval() {
        let v = with(
            with(http_monitor(), "interval_ms", json!(5000)),
            "timeout_ms",
            json!(6000),
        );
        assert_eq!(field_of(v), "timeout_ms");
        assert_eq!(
            field_of(with(http_monitor(), "timeout_ms", json!(1))),
            "timeout_ms"
        );
    }

    #[test]
    fn unknown_kind_is_rejected_naming_it() {
        let err = spec(with(http_monitor(), "kind", json!("ftp"))).unwrap_err();
        assert!(err.contains("ftp") && err.contains("http"), "{err}");
    }

    #[test]
    fn unknown_fields_are_rejected_naming_them() {
        let err = spec(with(http_monitor(), "intervall_ms", json!(5000))).unwrap_err();
        assert!(err.contains("intervall_ms"), "{err}");
    }

    #[test]
    fn bad_names_are_rejected() {
        assert_eq!(field_of(with(http_monitor(), "name", json!("  "))), "name");
        assert_eq!(
            field_of(with(http_monitor(), "name", json!("x".repeat(201)))),
            "name"
        );
    }

    #[test]
    fn targets_are_checked_per_kind() {
        for bad in ["example.com", "ftp://example.com", "http://", "not a url"] {
            assert_eq!(
                field_of(with(http_monitor(), "target", json!(bad))),
                "target",
                "{bad}"
            );
        }
        let tcp = |t: &str| json!({"name": "db", "kind": "tcp", "target": t});
        assert_eq!(field_of(tcp("db.example.com")), "target");
        assert_eq!(field_of(tcp("db.example.com:99999")), "target");
        assert_eq!(field_of(tcp("bad host:80")), "target");
        spec(tcp("db.example.com:5432"))
            .unwrap()
            .validate()
            .unwrap();
        spec(tcp("[2001:db8::1]:22")).unwrap().validate().unwrap();
        spec(tcp("127.0.0.1:22")).unwrap().validate().unwrap();
        let dns = |t: &str| json!({"name": "n", "kind": "dns", "target": t});
        spec(dns("example.com")).unwrap().validate().unwrap();
        assert_eq!(field_of(dns("exa mple.com")), "target");
        let tls = |t: &str| json!({"name": "n", "kind": "tls", "target": t});
        spec(tls("example.com")).unwrap().validate().unwrap();
        spec(tls("example.com:8443")).unwrap().validate().unwrap();
        assert_eq!(field_of(tls("example.com:port")), "target");
    }

    #[test]
    fn http_settings_are_typed() {
        let bad_method = with(http_monitor(), "settings", json!({"method": "FETCH"}));
        let err = spec(bad_method).unwrap().validate().unwrap_err();
        assert_eq!(err.field, "settings.method");
        let bad_code = with(
            http_monitor(),
            "settings",
            json!({"expected_status": [200, 700]}),
        );
        assert_eq!(field_of(bad_code), "settings.expected_status");
        let typo = with(http_monitor(), "settings", json!({"keywrd": "ok"}));
        let err = spec(typo).unwrap().validate().unwrap_err();
        assert_eq!(err.field, "settings");
        assert!(err.message.contains("keywrd"), "{}", err.message);
        let bad_header = with(http_monitor(), "settings", json!({"headers": {"a b": "x"}}));
        assert_eq!(field_of(bad_header), "settings.headers");
        let good = with(
            http_monitor(),
            "settings",
            json!({"method": "POST", "expected_status": [200, 204], "headers": {"X-Token": "t"}}),
        );
        spec(good).unwrap().validate().unwrap();
    }

    #[test]
    fn placement_fields_must_be_consistent() {
        let pinned = with(http_monitor(), "poller_mode", json!("pinned"));
        assert_eq!(field_of(pinned), "poller_id");
        let grouped = with(http_monitor(), "poller_mode", json!("grouped"));
        assert_eq!(field_of(grouped), "poller_region");
        let bad_region = with(
            with(http_monitor(), "poller_mode", json!("grouped")),
            "poller_region",
            json!("eu west"),
        );
        assert_eq!(field_of(bad_region), "poller_region");
        let pinned_ok = with(
            with(http_monitor(), "poller_mode", json!("pinned")),
            "poller_id",
            json!(Uuid::new_v4()),
        );
        let monitor = spec(pinned_ok).unwrap();
        monitor.validate().unwrap();
        assert!(
            !monitor.effective_failover(),
            "pinned monitors do not fail over by default"
        );
    }

    #[test]
    fn multi_location_needs_distinct_regions_and_a_reachable_quorum() {
        let multi = |regions: Value, quorum: Value| {
            let mut m = with(http_monitor(), "poller_mode", json!("multi"));
            m["poller_regions"] = regions;
            m["quorum"] = quorum;
            m
        };
        assert_eq!(
            field_of(with(http_monitor(), "poller_mode", json!("multi"))),
            "poller_regions"
        );
        assert_eq!(
            field_of(multi(json!(["eu"]), Value::Null)),
            "poller_regions"
        );
        assert_eq!(
            field_of(multi(json!(["eu", "eu"]), Value::Null)),
            "poller_regions"
        );
        assert_eq!(
            field_of(multi(json!(["eu", "us west"]), Value::Null)),
            "poller_regions"
        );
        assert_eq!(field_of(multi(json!(["eu", "us"]), json!(3))), "quorum");
        assert_eq!(field_of(multi(json!(["eu", "us"]), json!(0))), "quorum");
        let three = spec(multi(json!(["eu", "us", "ap"]), Value::Null)).unwrap();
        three.validate().unwrap();
        assert_eq!(three.effective_quorum(), 2, "a majority of three");
        assert!(three.effective_failover());
        let four = spec(multi(json!(["a", "b", "c", "d"]), Value::Null)).unwrap();
        assert_eq!(four.effective_quorum(), 3, "a majority of four");
        let set = spec(multi(json!(["eu", "us"]), json!(1))).unwrap();
        assert_eq!(set.effective_quorum(), 1);
        // Location fields on a single-location monitor are a mistake, not ignored.
        let stray = with(http_monitor(), "poller_regions", json!(["eu", "us"]));
        assert_eq!(field_of(stray), "poller_regions");
        assert_eq!(field_of(with(http_monitor(), "quorum", json!(1))), "quorum");
    }

    #[test]
    fn patch_distinguishes_null_from_missing() {
        let patch: MonitorPatch = serde_json::from_value(json!({"poller_region": null})).unwrap();
        assert_eq!(patch.poller_region, Some(None));
        assert_eq!(patch.poller_datacenter, None);
        let mut monitor = spec(with(http_monitor(), "poller_region", json!("eu"))).unwrap();
        monitor.apply(patch);
        assert_eq!(monitor.poller_region, None);
    }
}
