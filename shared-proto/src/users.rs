//! Bodies of the settings API for users and API keys (operator → central). Who may call what
//! is central's (`service::access`); the shapes and field rules are here.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::duration::parse_api_duration;
use crate::monitor::{has_control, is_blank};
use crate::ValidationError;

/// What a user or an API key may do, each role everything the one before may do and more:
/// `viewer` reads; `editor` also changes monitors, channels, maintenance windows, agents and
/// their tokens; `admin` also manages users and reads the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Viewer,
    Editor,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "viewer" => Some(Role::Viewer),
            "editor" => Some(Role::Editor),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The shortest password accepted (besides zxcvbn's judgement, which central makes).
pub const MIN_PASSWORD_CHARS: usize = 12;
/// The longest: argon2 hashes whatever it is given, so a megabyte would cost as much to check.
pub const MAX_PASSWORD_CHARS: usize = 256;
/// The longest API key lifetime.
pub const MAX_KEY_LIFETIME: Duration = Duration::from_secs(3650 * 86_400);

/// `POST /api/v1/users`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: String,
    /// How the user is known; unique, compared without regard to case (stored lowercased).
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 3,
            max_length = 254,
            pattern = r"^[^@\s\x00-\x1f\x7f-\x9f]+@[^@\s\x00-\x1f\x7f-\x9f]+$"
        )
    )]
    pub email: String,
    pub role: Role,
    /// For logging in on the page; leave it out for a user who signs in by single sign-on
    /// only. 12 to 256 characters, and hard to guess (judged by zxcvbn).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(min_length = 12, max_length = 256))]
    pub password: Option<String>,
}

/// `PATCH /api/v1/users/{id}`: the fields given change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateUser {
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: Option<String>,
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 3,
            max_length = 254,
            pattern = r"^[^@\s\x00-\x1f\x7f-\x9f]+@[^@\s\x00-\x1f\x7f-\x9f]+$"
        )
    )]
    pub email: Option<String>,
    #[serde(default)]
    pub role: Option<Role>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(min_length = 12, max_length = 256))]
    pub password: Option<String>,
}

/// A user as the API shows one: never the password or its hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct User {
    pub id: Uuid,
    pub name: String,
    pub email: String,
    pub role: Role,
    /// Whether the user can log in with a password.
    pub has_password: bool,
    /// Whether the user has signed in by single sign-on.
    pub single_sign_on: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A user's web session (`GET /api/v1/users/{id}/sessions`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserSession {
    /// The SHA-256 of the session's cookie (the cookie itself is never stored), which names
    /// it for `DELETE`.
    pub id: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// `POST /api/v1/api-keys`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateApiKey {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: String,
    /// At most the maker's own role (`403 role_required` above it); default the maker's.
    #[serde(default)]
    pub role: Option<Role>,
    /// e.g. `90d`; unset means the key does not expire.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = key_lifetime_schema))]
    pub expires_in: Option<String>,
    /// Whose key it is: an admin may make one for another user (a team's CI, say), whose
    /// role then bounds it; anyone else's keys are their own. Unset: the maker's.
    #[serde(default)]
    pub user_id: Option<Uuid>,
}

/// An API key as the API shows one: never its secret, which is shown once, at creation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiKey {
    pub id: Uuid,
    pub name: String,
    pub role: Role,
    /// Whose it is (it acts as that user, bounded by their role now); `null` for a key made
    /// with the admin token for no user.
    pub user_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was last used, to the minute.
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// The answer to `POST /api/v1/api-keys`: the key and, this once, its secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedApiKey {
    #[serde(flatten)]
    pub key: ApiKey,
    /// The key itself, `pkey_<id>_<secret>`: `Authorization: Bearer <token>` on every call of
    /// the settings API. Shown only now.
    pub token: String,
}

#[cfg(feature = "openapi")]
fn key_lifetime_schema() -> utoipa::openapi::Object {
    crate::settings_api::duration_schema(
        MAX_KEY_LIFETIME,
        false,
        "How long the key works, e.g. `90d` (at most 3650d); unset: it does not expire.",
    )
}

fn validate_name(name: &str) -> Result<(), ValidationError> {
    if is_blank(name) || has_control(name) || name.chars().count() > 200 {
        return Err(ValidationError::new(
            "name",
            "must be 1 to 200 characters, without control characters (line breaks, tabs)",
        ));
    }
    Ok(())
}

/// An email as stored: lowercased; as given, one `@` with something on each side, no spaces
/// or control characters, at most 254 characters (the schema's pattern says the same).
/// Deliverability is not checked: it names the user, and single sign-on matches it.
pub fn normalized_email(email: &str) -> Result<String, ValidationError> {
    let shaped = email
        .split_once('@')
        .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty())
        && email.matches('@').count() == 1
        && email.chars().count() <= 254
        && !email.chars().any(|c| c.is_whitespace() || c.is_control());
    if shaped {
        Ok(email.to_lowercase())
    } else {
        Err(ValidationError::new(
            "email",
            "must be an address like ana@example.com (one @, no spaces, at most 254 characters)",
        ))
    }
}

fn validate_password(password: &str) -> Result<(), ValidationError> {
    let chars = password.chars().count();
    if !(MIN_PASSWORD_CHARS..=MAX_PASSWORD_CHARS).contains(&chars) {
        return Err(ValidationError::new(
            "password",
            format!("must be {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters"),
        ));
    }
    Ok(())
}

impl CreateUser {
    /// Checks the fields; returns the email as stored.
    pub fn validate(&self) -> Result<String, ValidationError> {
        validate_name(&self.name)?;
        let email = normalized_email(&self.email)?;
        if let Some(password) = &self.password {
            validate_password(password)?;
        }
        Ok(email)
    }
}

impl UpdateUser {
    /// Checks the fields given; returns the email as stored, if one is.
    pub fn validate(&self) -> Result<Option<String>, ValidationError> {
        if let Some(name) = &self.name {
            validate_name(name)?;
        }
        if let Some(password) = &self.password {
            validate_password(password)?;
        }
        self.email.as_deref().map(normalized_email).transpose()
    }
}

impl CreateApiKey {
    /// Checks the fields; returns the lifetime, if any.
    pub fn validate(&self) -> Result<Option<Duration>, ValidationError> {
        validate_name(&self.name)?;
        self.expires_in
            .as_deref()
            .map(|text| {
                let duration = parse_api_duration(text, MAX_KEY_LIFETIME)
                    .map_err(|m| ValidationError::new("expires_in", m))?;
                if duration.is_zero() {
                    return Err(ValidationError::new("expires_in", "must be longer than 0s"));
                }
                Ok(duration)
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_stored_lowercased_and_must_have_one_at() {
        assert_eq!(
            normalized_email("Ana@Example.COM").unwrap(),
            "ana@example.com"
        );
        for bad in [
            "",
            "ana",
            "@example.com",
            "ana@",
            "a@b@c",
            "ana @x.com",
            " a@x",
            "a\u{7}@x",
        ] {
            assert_eq!(normalized_email(bad).unwrap_err().field, "email", "{bad:?}");
        }
    }

    #[test]
    fn a_user_needs_a_name_and_a_long_enough_password_if_any() {
        let user = |name: &str, password: Option<&str>| CreateUser {
            name: name.into(),
            email: "ana@example.com".into(),
            role: Role::Viewer,
            password: password.map(str::to_string),
        };
        assert!(user("Ana", None).validate().is_ok());
        assert_eq!(user(" ", None).validate().unwrap_err().field, "name");
        assert_eq!(
            user("Ana", Some("short")).validate().unwrap_err().field,
            "password"
        );
        let long = "x".repeat(MAX_PASSWORD_CHARS + 1);
        assert_eq!(
            user("Ana", Some(&long)).validate().unwrap_err().field,
            "password"
        );
    }

    #[test]
    fn roles_read_and_order_as_named() {
        for role in [Role::Viewer, Role::Editor, Role::Admin] {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert!(Role::Viewer < Role::Editor && Role::Editor < Role::Admin);
        assert_eq!(Role::parse("root"), None);
    }
}
