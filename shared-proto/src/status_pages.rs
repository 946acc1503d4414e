//! Status pages on the wire: what operators write (`/api/v1/status-pages`) and what visitors
//! read (`/status/{slug}/summary.json`). A page shows chosen monitors under display names of
//! the operator's choosing, and nothing else of them: no target, poller, region or message.
//! Checks here are the ones that need no database; central checks the monitors exist and that
//! no other page has the slug or the domain.

use std::collections::HashSet;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::monitor::rules::{has_control, is_blank};
use crate::status_incidents::{ShownIncident, ShownMaintenance};
use crate::tags::validate_tags;
use crate::ValidationError;

/// The most sections one page has.
pub const MAX_SECTIONS: usize = 20;
/// The most monitors one section names by id.
pub const MAX_SECTION_MONITORS: usize = 200;
/// The most tags one section names.
pub const MAX_SECTION_TAGS: usize = 20;
/// The most monitors one page shows, whether named by id or by tag: a page is read by people,
/// and its rendering reads each one's status and 90 days.
pub const MAX_PAGE_MONITORS: usize = 500;
/// What a slug is, for the OpenAPI document: it is the page's address, `/status/{slug}`.
pub const SLUG_PATTERN: &str = r"^[a-z0-9][a-z0-9-]{0,62}$";
/// The days a page's bars show, today included.
pub const DAYS_SHOWN: usize = 90;

/// Who may read a page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    /// Anyone with the address.
    #[default]
    Public,
    /// Whoever knows the page's password.
    Password,
    /// Only users signed in to central's page.
    Users,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Public => "public",
            Visibility::Password => "password",
            Visibility::Users => "users",
        }
    }

    pub fn parse(text: &str) -> Option<Visibility> {
        [Visibility::Public, Visibility::Password, Visibility::Users]
            .into_iter()
            .find(|v| v.as_str() == text)
    }
}

/// Whether a page opens an incident itself when a monitor it shows is told down (and resolves
/// it when the monitor is told up again).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AutoIncidents {
    /// Operators open every incident.
    #[default]
    Off,
    /// A draft operators publish (`PATCH …/incidents/{iid}` with `published: true`).
    Draft,
    /// Published at once.
    Publish,
}

impl AutoIncidents {
    pub const ALL: [AutoIncidents; 3] = [
        AutoIncidents::Off,
        AutoIncidents::Draft,
        AutoIncidents::Publish,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AutoIncidents::Off => "off",
            AutoIncidents::Draft => "draft",
            AutoIncidents::Publish => "publish",
        }
    }

    pub fn parse(text: &str) -> Option<AutoIncidents> {
        Self::ALL.into_iter().find(|a| a.as_str() == text)
    }
}

/// A section of a page: a heading, and the monitors under it, named by id (in this order)
/// then by tag (by display name).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StatusPageSection {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 200))]
    pub monitor_ids: Vec<Uuid>,
    /// Every monitor carrying one of these tags, as monitors are tagged when the page is read.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub tags: Vec<String>,
    /// The names visitors see for monitors of this section (named by id or by tag); a monitor
    /// without one shows its own name. Internal names stay internal this way.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 200))]
    pub display_names: Vec<DisplayName>,
}

/// The name visitors see for one monitor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DisplayName {
    pub monitor_id: Uuid,
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: String,
}

/// A status page as an operator writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StatusPageSpec {
    /// The page's address: `/status/{slug}`.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[a-z0-9][a-z0-9-]{0,62}$"))]
    pub slug: String,
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub title: String,
    /// Plain text under the title (line breaks kept).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 2000))]
    pub description: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub sections: Vec<StatusPageSection>,
    #[serde(default)]
    pub visibility: Visibility,
    /// Write-only: the password of a `password` page (8 to 200 characters), never shown.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(min_length = 8, max_length = 200))]
    pub password: Option<String>,
    /// A host name that serves this page at `/` (its `Host` header, or the forwarded host
    /// behind `CENTRAL_TRUSTED_PROXIES`).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 253,
            pattern = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$"
        )
    )]
    pub domain: Option<String>,
    /// Whether the page opens an incident itself when a monitor it shows is told down.
    #[serde(default)]
    pub auto_incidents: AutoIncidents,
    /// The page's logo, shown beside its title: a `data:` URL of a PNG, JPEG, WebP or SVG
    /// image of at most 64 KiB (`data:image/png;base64,…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 87424,
            pattern = r"^data:image/(png|jpeg|webp|svg\+xml);base64,[A-Za-z0-9+/]*={0,2}$"
        )
    )]
    pub logo: Option<String>,
}

/// A change to a page: the fields given replace the page's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StatusPagePatch {
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[a-z0-9][a-z0-9-]{0,62}$"))]
    pub slug: Option<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub title: Option<String>,
    #[serde(default, with = "crate::monitor::double_option")]
    #[cfg_attr(feature = "openapi", schema(max_length = 2000))]
    pub description: Option<Option<String>>,
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub sections: Option<Vec<StatusPageSection>>,
    pub visibility: Option<Visibility>,
    #[cfg_attr(feature = "openapi", schema(min_length = 8, max_length = 200))]
    pub password: Option<String>,
    #[serde(default, with = "crate::monitor::double_option")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 253,
            pattern = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$"
        )
    )]
    pub domain: Option<Option<String>>,
    pub auto_incidents: Option<AutoIncidents>,
    /// A new logo, or `null` to remove it.
    #[serde(default, with = "crate::monitor::double_option")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 87424,
            pattern = r"^data:image/(png|jpeg|webp|svg\+xml);base64,[A-Za-z0-9+/]*={0,2}$"
        )
    )]
    pub logo: Option<Option<String>>,
}

/// A page as stored, for operators: its password is never shown, only whether it has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatusPageView {
    pub id: Uuid,
    pub slug: String,
    pub title: String,
    pub description: Option<String>,
    pub sections: Vec<StatusPageSection>,
    pub visibility: Visibility,
    pub has_password: bool,
    pub domain: Option<String>,
    pub auto_incidents: AutoIncidents,
    /// The logo as it was given (a `data:` URL).
    pub logo: Option<String>,
    /// Where visitors read it, relative to central: `/status/{slug}`.
    pub path: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The largest logo, decoded.
pub const MAX_LOGO_BYTES: usize = 64 * 1024;

/// A page's logo, decoded from the `data:` URL it was given in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logo {
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
}

/// The logo a `data:` URL holds: one of the image types a page takes, at most
/// `MAX_LOGO_BYTES`, whose bytes are what its type says (a PNG's signature, JPEG's, WebP's,
/// an SVG document), so that a page never serves something else under an image's name.
pub fn parse_logo(field: &str, text: &str) -> Result<Logo, ValidationError> {
    use base64::Engine;
    const TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/webp", "image/svg+xml"];
    let shape = || {
        ValidationError::new(
            field,
            "must be a data: URL of a PNG, JPEG, WebP or SVG image, like \
             data:image/png;base64,iVBORw0…",
        )
    };
    let rest = text.strip_prefix("data:").ok_or_else(shape)?;
    let (kind, data) = rest.split_once(";base64,").ok_or_else(shape)?;
    let content_type = TYPES.into_iter().find(|t| *t == kind).ok_or_else(shape)?;
    if data.len() > MAX_LOGO_BYTES.div_ceil(3) * 4 {
        return Err(ValidationError::value(
            field,
            format!("must be at most {} KiB", MAX_LOGO_BYTES / 1024),
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        // The pattern admits it (base64's letters): a value error, not the field's shape.
        .map_err(|_| ValidationError::value(field, "holds base64 that does not decode"))?;
    if bytes.len() > MAX_LOGO_BYTES {
        return Err(ValidationError::value(
            field,
            format!("must be at most {} KiB", MAX_LOGO_BYTES / 1024),
        ));
    }
    let is_svg = || {
        std::str::from_utf8(&bytes).is_ok_and(|svg| {
            let svg = svg.trim_start_matches('\u{feff}').trim_start();
            svg.starts_with('<') && svg.contains("<svg")
        })
    };
    let looks_right = match content_type {
        "image/png" => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/jpeg" => bytes.starts_with(b"\xff\xd8\xff"),
        "image/webp" => bytes.len() > 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP",
        _ => is_svg(),
    };
    if !looks_right {
        return Err(ValidationError::value(
            field,
            format!("is not a {content_type} image (its bytes are something else)"),
        ));
    }
    Ok(Logo {
        content_type,
        bytes,
    })
}

/// A text of a page: not blank, no control characters, at most `max` characters.
fn validate_text(field: &str, text: &str, max: usize) -> Result<(), ValidationError> {
    if is_blank(text) {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    if has_control(text) {
        return Err(ValidationError::new(
            field,
            "must not contain control characters (line breaks, tabs)",
        ));
    }
    if text.chars().count() > max {
        return Err(ValidationError::new(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    Ok(())
}

pub fn validate_slug(field: &str, slug: &str) -> Result<(), ValidationError> {
    let mut bytes = slug.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if first_ok && rest_ok && slug.len() <= 63 {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!(
                "`{}` is not a valid slug; use 1 to 63 lower-case letters, digits or `-`, \
                 starting with a letter or digit",
                slug.escape_debug()
            ),
        ))
    }
}

/// A host name as `Host` headers carry it, lower-case, with at least one dot and no port.
pub fn validate_domain(field: &str, domain: &str) -> Result<(), ValidationError> {
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    let labels: Vec<&str> = domain.split('.').collect();
    if domain.len() <= 253 && labels.len() >= 2 && labels.iter().all(|l| label_ok(l)) {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!(
                "`{}` is not a host name; write it in lower case without a scheme, port or \
                 path (`status.example.com`)",
                domain.escape_debug()
            ),
        ))
    }
}

fn validate_sections(sections: &[StatusPageSection]) -> Result<(), ValidationError> {
    if sections.len() > MAX_SECTIONS {
        return Err(ValidationError::new(
            "sections",
            format!("a page has at most {MAX_SECTIONS} sections"),
        ));
    }
    let mut named = 0;
    for (i, section) in sections.iter().enumerate() {
        validate_text(&format!("sections[{i}].name"), &section.name, 200)?;
        if section.monitor_ids.len() > MAX_SECTION_MONITORS {
            return Err(ValidationError::new(
                format!("sections[{i}].monitor_ids"),
                format!("a section names at most {MAX_SECTION_MONITORS} monitors"),
            ));
        }
        validate_tags(
            &format!("sections[{i}].tags"),
            &section.tags,
            MAX_SECTION_TAGS,
        )?;
        if section.display_names.len() > MAX_SECTION_MONITORS {
            return Err(ValidationError::new(
                format!("sections[{i}].display_names"),
                format!("a section has at most {MAX_SECTION_MONITORS} display names"),
            ));
        }
        let mut named_twice = HashSet::new();
        for (j, display) in section.display_names.iter().enumerate() {
            validate_text(
                &format!("sections[{i}].display_names[{j}].name"),
                &display.name,
                200,
            )?;
            if !named_twice.insert(display.monitor_id) {
                return Err(ValidationError::combination(
                    format!("sections[{i}].display_names[{j}].monitor_id"),
                    format!("gives monitor {} a second name", display.monitor_id),
                ));
            }
        }
        named += section.monitor_ids.len();
    }
    if named > MAX_PAGE_MONITORS {
        return Err(ValidationError::combination(
            "sections",
            format!("a page shows at most {MAX_PAGE_MONITORS} monitors"),
        ));
    }
    Ok(())
}

fn validate_password(password: &str) -> Result<(), ValidationError> {
    let length = password.chars().count();
    if !(8..=200).contains(&length) {
        return Err(ValidationError::new(
            "password",
            "must be 8 to 200 characters",
        ));
    }
    Ok(())
}

impl StatusPagePatch {
    /// Each field's own rules (`400`); the rules between fields are the page's, once applied.
    pub fn validate_fields(&self) -> Result<(), ValidationError> {
        if let Some(slug) = &self.slug {
            validate_slug("slug", slug)?;
        }
        if let Some(title) = &self.title {
            validate_text("title", title, 200)?;
        }
        if let Some(Some(description)) = &self.description {
            validate_description(description)?;
        }
        if let Some(sections) = &self.sections {
            validate_sections(sections)?;
        }
        if let Some(password) = &self.password {
            validate_password(password)?;
        }
        if let Some(Some(domain)) = &self.domain {
            validate_domain("domain", domain)?;
        }
        if let Some(Some(logo)) = &self.logo {
            parse_logo("logo", logo)?;
        }
        Ok(())
    }
}

fn validate_description(description: &str) -> Result<(), ValidationError> {
    if description.chars().count() > 2000 {
        return Err(ValidationError::new(
            "description",
            "must be at most 2000 characters",
        ));
    }
    Ok(())
}

impl StatusPageSpec {
    /// The page's own rules. `has_password`: the page as stored has one already (a change
    /// that keeps `visibility: password` need not send it again).
    pub fn validate(&self, has_password: bool) -> Result<(), ValidationError> {
        validate_slug("slug", &self.slug)?;
        validate_text("title", &self.title, 200)?;
        if let Some(description) = &self.description {
            validate_description(description)?;
        }
        validate_sections(&self.sections)?;
        if let Some(password) = &self.password {
            validate_password(password)?;
            if self.visibility != Visibility::Password {
                return Err(ValidationError::combination(
                    "password",
                    "only a page with `visibility: password` has a password",
                ));
            }
        } else if self.visibility == Visibility::Password && !has_password {
            return Err(ValidationError::combination(
                "password",
                "a page with `visibility: password` needs a `password` (8 to 200 characters)",
            ));
        }
        if let Some(domain) = &self.domain {
            validate_domain("domain", domain)?;
        }
        if let Some(logo) = &self.logo {
            parse_logo("logo", logo)?;
        }
        Ok(())
    }

    pub fn apply(&mut self, patch: StatusPagePatch) {
        let StatusPagePatch {
            slug,
            title,
            description,
            sections,
            visibility,
            password,
            domain,
            auto_incidents,
            logo,
        } = patch;
        if let Some(v) = logo {
            self.logo = v;
        }
        if let Some(v) = slug {
            self.slug = v;
        }
        if let Some(v) = title {
            self.title = v;
        }
        if let Some(v) = description {
            self.description = v;
        }
        if let Some(v) = sections {
            self.sections = v;
        }
        if let Some(v) = visibility {
            self.visibility = v;
        }
        self.password = password;
        if let Some(v) = domain {
            self.domain = v;
        }
        if let Some(v) = auto_incidents {
            self.auto_incidents = v;
        }
    }
}

/// What a visitor is told of one monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ShownStatus {
    Up,
    /// Slower than its threshold, or down from fewer locations than its quorum.
    Degraded,
    Down,
    Maintenance,
    /// Not checked lately, paused, or never checked yet: nobody can say.
    Unknown,
}

/// What the page says of everything it shows, at the top.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PageStatus {
    Operational,
    Degraded,
    /// Some shown monitors are down (`partial`), or all those whose status is known (`major`).
    Outage,
    Maintenance,
    /// No shown monitor's status is known.
    Unknown,
}

/// How much of the page is down, when it is `outage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OutageScale {
    Partial,
    Major,
}

/// One day of a monitor's bar: its uptime that day (UTC), `None` when nothing was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ShownDay {
    pub date: NaiveDate,
    /// Percent of the measured time that was up.
    pub uptime: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ShownMonitor {
    pub id: Uuid,
    /// The section's display name for it, else its own name.
    pub name: String,
    pub status: ShownStatus,
    /// Percent up over the last 90 days' measured time; `None` when nothing was measured.
    pub uptime_90d: Option<f64>,
    /// The same over the last 24 hours, 7 and 30 days (for badges).
    pub uptime_24h: Option<f64>,
    pub uptime_7d: Option<f64>,
    pub uptime_30d: Option<f64>,
    /// The newest result's latency, when it has one.
    pub latency_ms: Option<u64>,
    /// The last 90 days, oldest first, today last.
    pub days: Vec<ShownDay>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ShownSection {
    pub name: String,
    pub monitors: Vec<ShownMonitor>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ShownPage {
    pub title: String,
    pub slug: String,
    pub description: Option<String>,
}

/// `GET /status/{slug}/summary.json`: everything the page shows, for widgets and dashboards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatusSummary {
    pub page: ShownPage,
    pub status: PageStatus,
    /// Set when `status` is `outage`.
    pub outage: Option<OutageScale>,
    pub sections: Vec<ShownSection>,
    /// Open incidents, then those resolved in the last `RESOLVED_SHOWN_DAYS` days, newest
    /// first in each.
    #[serde(default)]
    pub incidents: Vec<ShownIncident>,
    /// Maintenance over the page's monitors under way now or starting within
    /// `MAINTENANCE_AHEAD_DAYS` days, soonest first.
    #[serde(default)]
    pub maintenance: Vec<ShownMaintenance>,
    /// When this summary was put together (pages are rendered once for every reader and
    /// refreshed every few seconds).
    pub generated_at: DateTime<Utc>,
}

impl StatusSummary {
    /// The page's overall status from its monitors': any down is an outage (major when every
    /// monitor whose status is known is down), else any degraded, else any in maintenance;
    /// unknown ones count only when every one is unknown.
    pub fn overall(
        statuses: impl IntoIterator<Item = ShownStatus>,
    ) -> (PageStatus, Option<OutageScale>) {
        let (mut known, mut down, mut degraded, mut maintenance) = (0, 0, 0, 0);
        for status in statuses {
            match status {
                ShownStatus::Unknown => continue,
                ShownStatus::Down => down += 1,
                ShownStatus::Degraded => degraded += 1,
                ShownStatus::Maintenance => maintenance += 1,
                ShownStatus::Up => {}
            }
            known += 1;
        }
        if known == 0 {
            (PageStatus::Unknown, None)
        } else if down > 0 {
            let scale = if down == known {
                OutageScale::Major
            } else {
                OutageScale::Partial
            };
            (PageStatus::Outage, Some(scale))
        } else if degraded > 0 {
            (PageStatus::Degraded, None)
        } else if maintenance > 0 {
            (PageStatus::Maintenance, None)
        } else {
            (PageStatus::Operational, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> StatusPageSpec {
        StatusPageSpec {
            slug: "acme".into(),
            title: "Acme".into(),
            description: None,
            sections: vec![],
            visibility: Visibility::Public,
            password: None,
            domain: None,
            auto_incidents: AutoIncidents::Off,
            logo: None,
        }
    }

    #[test]
    fn a_logo_is_an_image_of_the_type_it_names() {
        use base64::Engine;
        let url = |kind: &str, bytes: &[u8]| {
            let data = base64::engine::general_purpose::STANDARD.encode(bytes);
            format!("data:{kind};base64,{data}")
        };
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        let logo = parse_logo("logo", &url("image/png", png)).unwrap();
        assert_eq!(
            (logo.content_type, logo.bytes.as_slice()),
            ("image/png", &png[..])
        );
        let svg = b"<?xml version='1.0'?><svg xmlns='http://www.w3.org/2000/svg'/>";
        assert!(parse_logo("logo", &url("image/svg+xml", svg)).is_ok());
        for bad in [
            url("image/png", b"<html><script>alert(1)</script>"),
            url("image/svg+xml", b"<html><script>alert(1)</script></html>"),
            url("image/jpeg", png),
            url("text/html", b"<svg/>"),
            url("image/png", &[0x89; MAX_LOGO_BYTES + 1]),
            "data:image/png,plain".into(),
            "https://example.com/logo.png".into(),
            "data:image/png;base64,***".into(),
        ] {
            let error = parse_logo("logo", &bad).unwrap_err();
            assert_eq!(error.field, "logo", "{bad:.60}");
        }
        let mut with_logo = spec();
        with_logo.logo = Some(url("image/png", png));
        assert!(with_logo.validate(false).is_ok());
        with_logo.logo = Some("data:image/gif;base64,R0lGOD".into());
        assert_eq!(with_logo.validate(false).unwrap_err().field, "logo");
    }

    #[test]
    fn slugs_are_lower_case_words() {
        for good in ["a", "acme", "acme-status", "0", &"a".repeat(63)] {
            assert!(validate_slug("slug", good).is_ok(), "{good}");
        }
        for bad in ["", "-a", "Acme", "a_b", "a/b", "a b", "ä", &"a".repeat(64)] {
            assert!(validate_slug("slug", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn domains_are_bare_lower_case_host_names() {
        for good in ["status.example.com", "a.b", "x-1.example.org"] {
            assert!(validate_domain("domain", good).is_ok(), "{good}");
        }
        for bad in [
            "localhost",
            "Status.example.com",
            "https://status.example.com",
            "status.example.com:8080",
            "-a.example.com",
            "a..b",
            "status.example.com/",
        ] {
            assert!(validate_domain("domain", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_password_page_needs_a_password_and_only_it_has_one() {
        let mut page = StatusPageSpec {
            visibility: Visibility::Password,
            ..spec()
        };
        let error = page.validate(false).unwrap_err();
        assert_eq!(error.field, "password");
        assert!(page.validate(true).is_ok(), "a stored password is kept");
        page.password = Some("short".into());
        assert_eq!(page.validate(false).unwrap_err().field, "password");
        page.password = Some("long enough".into());
        assert!(page.validate(false).is_ok());
        page.visibility = Visibility::Public;
        assert_eq!(page.validate(false).unwrap_err().field, "password");
    }

    #[test]
    fn a_section_names_its_bad_field() {
        let page = StatusPageSpec {
            sections: vec![
                StatusPageSection {
                    name: "API".into(),
                    ..Default::default()
                },
                StatusPageSection {
                    name: "Web".into(),
                    tags: vec!["bad tag".into()],
                    ..Default::default()
                },
            ],
            ..spec()
        };
        assert!(page
            .validate(false)
            .unwrap_err()
            .field
            .starts_with("sections[1].tags"));
    }

    #[test]
    fn the_overall_status_follows_the_worst_known_one() {
        use ShownStatus::*;
        let overall = |statuses: &[ShownStatus]| StatusSummary::overall(statuses.iter().copied());
        assert_eq!(overall(&[Up, Up]), (PageStatus::Operational, None));
        assert_eq!(
            overall(&[Up, Degraded, Maintenance]),
            (PageStatus::Degraded, None)
        );
        assert_eq!(overall(&[Up, Maintenance]), (PageStatus::Maintenance, None));
        assert_eq!(
            overall(&[Up, Down]),
            (PageStatus::Outage, Some(OutageScale::Partial))
        );
        assert_eq!(
            overall(&[Down, Unknown, Down]),
            (PageStatus::Outage, Some(OutageScale::Major))
        );
        assert_eq!(overall(&[Unknown]), (PageStatus::Unknown, None));
        assert_eq!(overall(&[]), (PageStatus::Unknown, None));
    }
}
