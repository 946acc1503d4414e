//! The audit log as the settings API shows it (`GET /api/v1/audit`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditActor {
    /// `user`, `api_key`, `admin_token`, or `anonymous` for a refused sign-in (whose `name`
    /// is what was tried: an email, `admin token`, `single sign-on`).
    pub kind: String,
    /// The user's or the key's id; `null` for the admin token and `anonymous`.
    pub id: Option<String>,
    /// For an API key, the user it acted for (`null` for a key made with the admin token, and
    /// for the other kinds). Kept after the key or the user is removed.
    #[serde(default)]
    pub user_id: Option<String>,
    /// The user's or the key's name when it acted.
    pub name: String,
    /// The client's address (through `CENTRAL_TRUSTED_PROXIES`).
    pub address: Option<String>,
}

/// What a change was made to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditObject {
    /// The settings API's name for its collection: `monitors`, `notification-channels`,
    /// `maintenance-windows`, `pollers`, `registration-tokens`, `dependency-aliases`, `users`,
    /// `api-keys`; or `sessions` for sign-ins and sign-outs on the page (`login`,
    /// `login_failed`, `logout`, with `after.method`: `password`, `admin_token`, `sso`).
    pub kind: String,
    /// Its id, when the change named one (`null` for a creation: see `after`, or a change by
    /// tag).
    pub id: Option<String>,
}

/// One change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    pub id: Uuid,
    pub at: DateTime<Utc>,
    pub actor: AuditActor,
    /// `create`, `update`, `delete`, or the verb of the route (`pause`, `resume`, `rotate`,
    /// `revoke`, `check`, `reset`, `test`, `mute`, `ping_url`).
    pub action: String,
    pub object: AuditObject,
    /// The object as the settings API showed it just before (secrets are never in a view).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub before: Option<serde_json::Value>,
    /// The change's answer: the object after it, or what the action answered.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub after: Option<serde_json::Value>,
}

/// The filters of `GET /api/v1/audit`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditFilter {
    /// Changes by this user or key id.
    pub actor_id: Option<String>,
    /// Changes by this kind of actor (`user`, `api_key`, `admin_token`, `anonymous`).
    pub actor_kind: Option<String>,
    /// Changes to this kind of object.
    pub object_kind: Option<String>,
    /// Changes to this object.
    pub object_id: Option<String>,
}
