//! Who may do what: the roles, the principal a settings-API request acts as, and the role each
//! operation needs. One table decides every operation, so that a reader (and a test) sees the
//! whole policy here. Pure: how a credential becomes a principal is `api::authz`'s, and this
//! module reads no store and no request.

use axum::http::Method;
use uuid::Uuid;

pub use shared_proto::users::Role;

/// Who makes a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// The bootstrap and break-glass credential (`CENTRAL_ADMIN_TOKEN`).
    AdminToken,
    /// A user, on the page (a session) or through single sign-on.
    User { id: Uuid, name: String },
    /// An API key, made by a user (`maker`) or with the admin token (`None`).
    ApiKey {
        id: Uuid,
        name: String,
        maker: Option<Uuid>,
    },
}

/// Who holds a credential, for sharing the operator pool (`Principal::holder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Holder {
    AdminToken,
    /// The metrics token of `/metrics`.
    MetricsToken,
    User(Uuid),
    Key(Uuid),
}

/// An authenticated caller of the settings API and the role it acts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub actor: Actor,
    pub role: Role,
}

impl Principal {
    pub fn admin_token() -> Self {
        Principal {
            actor: Actor::AdminToken,
            role: Role::Admin,
        }
    }

    /// Who holds the credential, as the operator pool shares its places (`api::pools`): a
    /// user, whether by a session or any of their keys; a key made with the admin token,
    /// which belongs to nobody, alone; the admin token.
    pub fn holder(&self) -> Holder {
        match &self.actor {
            Actor::AdminToken => Holder::AdminToken,
            Actor::User { id, .. } => Holder::User(*id),
            Actor::ApiKey {
                maker: Some(user), ..
            } => Holder::User(*user),
            Actor::ApiKey {
                id, maker: None, ..
            } => Holder::Key(*id),
        }
    }

    /// The user acting, themselves or through one of their keys.
    pub fn user_id(&self) -> Option<Uuid> {
        match &self.actor {
            Actor::AdminToken => None,
            Actor::User { id, .. } => Some(*id),
            Actor::ApiKey { maker, .. } => *maker,
        }
    }

    /// How an answer or a log line names this principal: `admin token`, `user Ana`,
    /// `API key "deploy"`.
    pub fn describe(&self) -> String {
        match &self.actor {
            Actor::AdminToken => "the admin token".into(),
            Actor::User { name, .. } => format!("user {name}"),
            Actor::ApiKey { name, .. } => format!("API key \"{name}\""),
        }
    }

    /// Whether this principal may make a request that needs `needed`.
    pub fn may(&self, needed: Role) -> bool {
        self.role >= needed
    }
}

/// Paths of the settings API (below `/api/v1`, as routed) whose every operation needs one
/// role, whatever the method: who may act and what they did are an admin's to see and
/// change; so is enrolling pollers, since a poller receives its monitors' request headers
/// and bodies in the clear (an editor who could enrol one could pin a monitor to it and
/// read them); API keys are anyone's to make and revoke for themselves (`service::api_keys` keeps
/// each key at or below its maker's role and to its maker's own keys).
const WHOLE_PATHS: [(&str, Role); 4] = [
    ("/users", Role::Admin),
    ("/registration-tokens", Role::Admin),
    ("/audit", Role::Admin),
    ("/api-keys", Role::Viewer),
];

/// A status page's subscribers, as the route is matched.
const SUBSCRIBERS: &str = "/status-pages/{id}/subscribers";

/// Whether `path` is `prefix` or below it (`/users/1`, not `/usersx`).
fn is_under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The role an operation of the settings API needs: `WHOLE_PATHS` first, then reading needs
/// `viewer` and changing needs `editor`. `path` is the route as matched (`/monitors/{id}`), so
/// that no value in a request can pick another rule.
pub fn required_role(method: &Method, path: &str) -> Role {
    let under = |prefix: &str| is_under(path, prefix);
    if let Some((_, role)) = WHOLE_PATHS.iter().find(|(prefix, _)| under(prefix)) {
        *role
    } else if under(SUBSCRIBERS) {
        // Strangers' mail addresses: kept to admins, as users' are.
        Role::Admin
    } else if method == Method::GET || method == Method::HEAD {
        Role::Viewer
    } else {
        Role::Editor
    }
}

/// The role a page or form of the web page needs: the audit log, users and registration
/// tokens need `admin` (as in `WHOLE_PATHS`); your
/// own API keys and logging out need no more than a session; reading needs `viewer`, every
/// other form that changes something `editor`.
pub fn required_role_on_page(method: &Method, path: &str) -> Role {
    let under = |prefix: &str| is_under(path, prefix);
    if under("/audit") || under("/users") || under("/tokens") {
        Role::Admin
    } else if under("/api-keys")
        || path == "/logout"
        || method == Method::GET
        || method == Method::HEAD
    {
        Role::Viewer
    } else {
        Role::Editor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_need_a_viewer_and_changes_an_editor() {
        assert_eq!(required_role(&Method::GET, "/monitors"), Role::Viewer);
        assert_eq!(required_role(&Method::HEAD, "/monitors/{id}"), Role::Viewer);
        for method in [Method::POST, Method::PATCH, Method::PUT, Method::DELETE] {
            assert_eq!(required_role(&method, "/monitors/{id}"), Role::Editor);
        }
        // A test send or a check changes nothing stored, but it acts on the world.
        assert_eq!(
            required_role(&Method::POST, "/notification-channels/{id}/test"),
            Role::Editor
        );
    }

    #[test]
    fn users_the_audit_log_and_enrolment_are_an_admins_even_to_read() {
        for path in [
            "/status-pages/{id}/subscribers",
            "/status-pages/{id}/subscribers/{sid}",
            "/users",
            "/users/{id}",
            "/audit",
            "/registration-tokens",
            "/registration-tokens/{id}/rotate",
        ] {
            assert_eq!(required_role(&Method::GET, path), Role::Admin, "{path}");
            assert_eq!(required_role(&Method::POST, path), Role::Admin, "{path}");
        }
        // A prefix is a whole segment: `/users-x` would not be under `/users`.
        assert_eq!(required_role(&Method::GET, "/users-x"), Role::Viewer);
    }

    #[test]
    fn on_the_page_forms_need_an_editor_but_logging_out_does_not() {
        assert_eq!(
            required_role_on_page(&Method::GET, "/monitors/{id}"),
            Role::Viewer
        );
        assert_eq!(
            required_role_on_page(&Method::POST, "/monitors/{id}/pause"),
            Role::Editor
        );
        assert_eq!(
            required_role_on_page(&Method::POST, "/logout"),
            Role::Viewer
        );
        assert_eq!(required_role_on_page(&Method::GET, "/audit"), Role::Admin);
        assert_eq!(required_role_on_page(&Method::POST, "/tokens"), Role::Admin);
        assert_eq!(
            required_role_on_page(&Method::POST, "/users/{id}/delete"),
            Role::Admin
        );
        assert_eq!(
            required_role_on_page(&Method::POST, "/api-keys/{id}/revoke"),
            Role::Viewer
        );
    }

    #[test]
    fn anyone_manages_their_own_api_keys() {
        for method in [Method::GET, Method::POST, Method::DELETE] {
            assert_eq!(required_role(&method, "/api-keys/{id}"), Role::Viewer);
        }
    }

    #[test]
    fn roles_are_ordered_and_each_may_what_the_lower_may() {
        assert!(Role::Viewer < Role::Editor && Role::Editor < Role::Admin);
        let admin = Principal::admin_token();
        for needed in [Role::Viewer, Role::Editor, Role::Admin] {
            assert!(admin.may(needed));
        }
        let viewer = Principal {
            role: Role::Viewer,
            ..admin
        };
        assert!(viewer.may(Role::Viewer));
        assert!(!viewer.may(Role::Editor));
    }
}
