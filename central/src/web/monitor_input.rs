//! What the monitor form holds, as typed, and how it becomes a spec or a patch: every field is
//! text until the service judges it, so a refused form comes back as the operator left it. The
//! fields are the API's own names, so a service error finds the field it names.

use crate::service::error::ServiceError;
use serde_json::{Map, Value};
use shared_proto::monitor::{DEFAULT_INTERVAL_MS, DEFAULT_TIMEOUT_MS};
use shared_proto::settings_api::MonitorView;
use shared_proto::{CheckKind, MonitorPatch, MonitorSpec, PollerMode};
use uuid::Uuid;

use super::check_settings::{self, FieldValues};
use super::fields::{optional, FieldError};

/// What the form holds, as typed (so a rejected form comes back as the operator left it).
#[derive(Debug, Clone, Default)]
pub struct MonitorForm {
    pub csrf: String,
    /// The monitor's `revision` when the edit form was drawn: the edit is saved only if
    /// nobody changed the monitor since (a pause made meanwhile is not undone).
    pub revision: String,
    pub name: String,
    pub kind: String,
    pub target: String,
    pub interval_ms: String,
    pub timeout_ms: String,
    pub poller_mode: String,
    pub poller_region: String,
    pub poller_datacenter: String,
    pub poller_id: String,
    pub poller_capability: String,
    pub poller_regions: String,
    pub quorum: String,
    pub failover: String,
    pub paused: bool,
    pub notification_channel_ids: Vec<String>,
    /// Tags, separated by commas or spaces.
    pub tags: String,
    /// The ids of the monitors it depends on, separated by commas or spaces.
    pub parent_ids: String,
    /// The JSON box: settings without a field of their own.
    pub settings: String,
    /// The fields of the kind's own settings (`settings.method`, …).
    pub check_values: FieldValues,
    /// The "Test" button sent the form: run it once, save nothing.
    pub test: bool,
}

impl MonitorForm {
    pub fn from_pairs(pairs: Vec<(String, String)>) -> Self {
        let mut form = MonitorForm::default();
        for (key, value) in pairs {
            match key.as_str() {
                "csrf" => form.csrf = value,
                "revision" => form.revision = value,
                "name" => form.name = value,
                "kind" => form.kind = value,
                "target" => form.target = value,
                "interval_ms" => form.interval_ms = value,
                "timeout_ms" => form.timeout_ms = value,
                "poller_mode" => form.poller_mode = value,
                "poller_region" => form.poller_region = value,
                "poller_datacenter" => form.poller_datacenter = value,
                "poller_id" => form.poller_id = value,
                "poller_capability" => form.poller_capability = value,
                "poller_regions" => form.poller_regions = value,
                "quorum" => form.quorum = value,
                "failover" => form.failover = value,
                "paused" => form.paused = true,
                "notification_channel_ids" => form.notification_channel_ids.push(value),
                "tags" => form.tags = value,
                "parent_ids" => form.parent_ids = value,
                "settings" => form.settings = value,
                "action" => form.test = value == "test",
                key if key.starts_with("settings.") => {
                    form.check_values.insert(key.to_string(), value);
                }
                _ => {}
            }
        }
        form
    }

    pub fn of(view: &MonitorView) -> Self {
        let spec = &view.spec;
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        let (check_values, rest) = check_settings::split(spec.kind, &spec.settings);
        MonitorForm {
            csrf: String::new(),
            revision: view.revision.to_string(),
            name: spec.name.clone(),
            kind: spec.kind.as_str().into(),
            target: spec.target.clone(),
            interval_ms: spec.interval_ms.to_string(),
            timeout_ms: spec.timeout_ms.to_string(),
            poller_mode: spec.poller_mode.as_str().into(),
            poller_region: text(&spec.poller_region),
            poller_datacenter: text(&spec.poller_datacenter),
            poller_id: spec.poller_id.map(|id| id.to_string()).unwrap_or_default(),
            poller_capability: text(&spec.poller_capability),
            poller_regions: spec.poller_regions.clone().unwrap_or_default().join(", "),
            quorum: spec.quorum.map(|q| q.to_string()).unwrap_or_default(),
            failover: match spec.failover {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None => String::new(),
            },
            paused: spec.paused,
            notification_channel_ids: spec
                .notification_channel_ids
                .iter()
                .map(Uuid::to_string)
                .collect(),
            tags: spec.tags.join(", "),
            parent_ids: spec
                .parent_ids
                .iter()
                .map(Uuid::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            settings: if rest.is_empty() {
                String::new()
            } else {
                serde_json::to_string_pretty(&rest).unwrap_or_default()
            },
            check_values,
            test: false,
        }
    }

    /// The spec the form describes, or the first field that cannot be read.
    pub fn to_spec(&self) -> Result<MonitorSpec, FieldError> {
        let number = |field: &str, text: &str, default: u64| -> Result<u64, FieldError> {
            match text.trim() {
                "" => Ok(default),
                text => text.parse().map_err(|_| {
                    FieldError::new(
                        field,
                        format!("must be a whole number of milliseconds, not `{text}`"),
                    )
                }),
            }
        };
        let kind = CheckKind::parse(&self.kind)
            .ok_or_else(|| FieldError::new("kind", "choose one of http, tcp, dns, tls"))?;
        let poller_mode = match self.poller_mode.as_str() {
            "" => PollerMode::Auto,
            mode => PollerMode::parse(mode)
                .ok_or_else(|| FieldError::new("poller_mode", "choose a placement"))?,
        };
        let poller_id = match self.poller_id.trim() {
            "" => None,
            id => Some(
                Uuid::try_parse(id)
                    .map_err(|_| FieldError::new("poller_id", "choose a poller from the list"))?,
            ),
        };
        let quorum =
            match self.quorum.trim() {
                "" => None,
                q => Some(q.parse().map_err(|_| {
                    FieldError::new("quorum", "must be a whole number of locations")
                })?),
            };
        let mut settings: Map<String, Value> = match self.settings.trim() {
            "" => Map::new(),
            text => match serde_json::from_str(text) {
                Ok(Value::Object(map)) => map,
                Ok(_) => {
                    return Err(FieldError::new(
                        "settings",
                        "must be a JSON object like {\"confirm_down\": 2}",
                    ))
                }
                Err(e) => {
                    return Err(FieldError::new(
                        "settings",
                        format!("is not valid JSON: {e}"),
                    ))
                }
            },
        };
        check_settings::merge(kind, &self.check_values, &mut settings)
            .map_err(|(field, message)| FieldError::new(&field, message))?;
        let notification_channel_ids = self
            .notification_channel_ids
            .iter()
            .map(|id| {
                Uuid::try_parse(id).map_err(|_| {
                    FieldError::new("notification_channel_ids", "choose channels from the list")
                })
            })
            .collect::<Result<_, _>>()?;
        let poller_regions = optional(&self.poller_regions).map(|regions| {
            regions
                .split(',')
                .map(|r| r.trim().to_string())
                .filter(|r| !r.is_empty())
                .collect()
        });
        Ok(MonitorSpec {
            name: self.name.trim().to_string(),
            kind,
            target: self.target.trim().to_string(),
            interval_ms: number("interval_ms", &self.interval_ms, DEFAULT_INTERVAL_MS)?,
            timeout_ms: number("timeout_ms", &self.timeout_ms, DEFAULT_TIMEOUT_MS)?,
            settings,
            poller_mode,
            poller_id,
            poller_region: optional(&self.poller_region),
            poller_datacenter: optional(&self.poller_datacenter),
            poller_capability: optional(&self.poller_capability),
            poller_regions,
            quorum,
            failover: match self.failover.as_str() {
                "yes" => Some(true),
                "no" => Some(false),
                _ => None,
            },
            paused: self.paused,
            notification_channel_ids,
            tags: split_tags(&self.tags),
            parent_ids: split_tags(&self.parent_ids)
                .iter()
                .map(|id| {
                    Uuid::try_parse(id).map_err(|_| {
                        FieldError::new("parent_ids", format!("`{id}` is not a monitor's id"))
                    })
                })
                .collect::<Result<_, _>>()?,
        })
    }
}

/// Everything in a spec, as a patch (the kind stays: it cannot change).
pub fn full_patch(spec: MonitorSpec) -> MonitorPatch {
    MonitorPatch {
        name: Some(spec.name),
        target: Some(spec.target),
        interval_ms: Some(spec.interval_ms),
        timeout_ms: Some(spec.timeout_ms),
        settings: Some(spec.settings),
        poller_mode: Some(spec.poller_mode),
        poller_id: Some(spec.poller_id),
        poller_region: Some(spec.poller_region),
        poller_datacenter: Some(spec.poller_datacenter),
        poller_capability: Some(spec.poller_capability),
        poller_regions: Some(spec.poller_regions),
        quorum: Some(spec.quorum),
        failover: spec.failover,
        paused: Some(spec.paused),
        notification_channel_ids: Some(spec.notification_channel_ids),
        tags: Some(spec.tags),
        parent_ids: Some(spec.parent_ids),
    }
}

/// Tags as typed in one box: separated by commas or whitespace (a tag holds neither).
pub fn split_tags(text: &str) -> Vec<String> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// The form field a service error names: `settings.expected_status` has its own field,
/// `settings.confirm_down` is in the JSON box, `poller_regions[1]` is the regions box.
pub fn field_of(error: &ServiceError) -> Option<FieldError> {
    let own = match error {
        ServiceError::Validation(e) if check_settings::has_field(&e.field) => e.field.as_str(),
        _ => return FieldError::of_service(error),
    };
    FieldError::of_service(error).map(|e| FieldError::new(own, e.message))
}

/// Whether an error about `field` shows beside an input (else above the form).
pub fn is_form_field(field: &str) -> bool {
    KNOWN_FIELDS.contains(&field) || check_settings::has_field(field)
}

const KNOWN_FIELDS: [&str; 18] = [
    "name",
    "kind",
    "target",
    "interval_ms",
    "timeout_ms",
    "poller_mode",
    "poller_region",
    "poller_datacenter",
    "poller_id",
    "poller_capability",
    "poller_regions",
    "quorum",
    "failover",
    "paused",
    "notification_channel_ids",
    "tags",
    "parent_ids",
    "settings",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_error_lands_beside_its_field() {
        let error = ServiceError::Validation(shared_proto::ValidationError::new(
            "settings.expected_status",
            "must list status codes",
        ));
        assert_eq!(field_of(&error).unwrap().field, "settings.expected_status");
        let error = ServiceError::Validation(shared_proto::ValidationError::new(
            "settings.confirm_down",
            "must be between 1 and 10",
        ));
        assert_eq!(field_of(&error).unwrap().field, "settings");
        let form = MonitorForm {
            kind: "http".into(),
            interval_ms: "soon".into(),
            ..Default::default()
        };
        assert_eq!(form.to_spec().unwrap_err().field, "interval_ms");
    }

    #[test]
    fn tags_are_typed_in_one_box() {
        assert_eq!(
            split_tags(" team:db, env:prod  k8s/ns,,"),
            ["team:db", "env:prod", "k8s/ns"]
        );
        assert!(split_tags("  ").is_empty());
    }
}
