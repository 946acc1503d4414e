//! A user and an API key as central keeps them: who they are, their role (typed: the role
//! every access rule compares) and how they sign in. The store makes them from its rows
//! (`store::users`); services decide on them. Must not: hold a rule (what a role may do is
//! `service::access`'; who may change whom is `service::users`' and `service::api_keys`').

use shared_proto::users::Role;

#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub id: String,
    pub name: String,
    /// Lowercased.
    pub email: String,
    pub role: Role,
    /// An argon2id PHC string; `None`: this user signs in by single sign-on only.
    pub password_hash: Option<String>,
    pub oidc_subject: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiKey {
    pub id: String,
    /// The user it acts for; `None`: nobody's (made with the admin token).
    pub user_id: Option<String>,
    pub name: String,
    pub role: Role,
    pub secret_sha256: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// Who made it: `store::MADE_WITH_ADMIN_TOKEN`, or the id of the user who did.
    pub made_by: Option<String>,
}
