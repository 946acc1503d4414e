//! Who may read a page that is not public: a `password` page's visitors once they gave its
//! password (a cookie of the page's own, signed with a key central makes once), a `users`
//! page's signed-in users of central. Owns the password check (argon2, in the strangers' lane,
//! so guessing visitors never take an operator's turn) and the cookie's value; failed tries
//! are limited per client by the request pools (`api::pools`), as logins are. Must not: render
//! a page or read a session (`web::status_pages`).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{StatusPage, StatusPages};
use crate::service::error::ServiceResult;
use crate::service::hashing::Lane;

/// The setting holding the key unlock cookies are signed with (one for the whole cluster).
const UNLOCK_KEY_SETTING: &str = "status_page_unlock_key";

/// The cookie that unlocks a `password` page, by its id: one per page, so unlocking one page
/// unlocks no other.
pub fn unlock_cookie_name(page: &StatusPage) -> String {
    format!("status_page_{}", page.id.simple())
}

/// The unlock cookie's value for `page`: an HMAC of the page's id and its password's hash, so
/// that a new password locks out everyone who gave the old one, and nobody can make one
/// without the key.
pub fn unlock_value(key: &[u8], page: &StatusPage) -> Option<String> {
    let hash = page.password_hash.as_deref()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(page.id.as_bytes());
    mac.update(hash.as_bytes());
    Some(hex::encode(mac.finalize().into_bytes()))
}

/// Whether `cookie` unlocks `page` (compared in constant time).
pub fn unlocks(key: &[u8], page: &StatusPage, cookie: &str) -> bool {
    let (Some(hash), Ok(given)) = (page.password_hash.as_deref(), hex::decode(cookie)) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(page.id.as_bytes());
    mac.update(hash.as_bytes());
    mac.verify_slice(&given).is_ok()
}

impl StatusPages {
    /// The key unlock cookies are signed with: made by the first replica that needs it.
    pub async fn unlock_key(&self) -> ServiceResult<Vec<u8>> {
        let key = self
            .store
            .setting_or_insert(UNLOCK_KEY_SETTING, &crate::service::auth::new_secret())
            .await?;
        Ok(key.into_bytes())
    }

    /// Whether `password` is `page`'s.
    pub async fn password_opens(&self, page: &StatusPage, password: String) -> ServiceResult<bool> {
        let Some(hash) = page.password_hash.clone() else {
            return Ok(false);
        };
        self.hashing.verify(Lane::Anyone, password, hash).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_proto::status_pages::Visibility;
    use uuid::Uuid;

    fn page(hash: &str) -> StatusPage {
        StatusPage {
            id: Uuid::new_v4(),
            slug: "p".into(),
            title: "P".into(),
            description: None,
            sections: vec![],
            visibility: Visibility::Password,
            password_hash: Some(hash.into()),
            domain: None,
            auto_incidents: Default::default(),
            logo: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn a_cookie_unlocks_its_page_only_until_the_password_changes() {
        let key = b"key";
        let first = page("$argon2id$one");
        let value = unlock_value(key, &first).unwrap();
        assert!(unlocks(key, &first, &value));
        assert!(
            !unlocks(b"another key", &first, &value),
            "made with the key only"
        );
        let other = StatusPage {
            id: Uuid::new_v4(),
            ..first.clone()
        };
        assert!(
            !unlocks(key, &other, &value),
            "one page's cookie opens no other"
        );
        let changed = StatusPage {
            password_hash: Some("$argon2id$two".into()),
            ..first.clone()
        };
        assert!(
            !unlocks(key, &changed, &value),
            "a new password locks the old cookie out"
        );
        assert!(!unlocks(key, &first, "not hex"));
        let public = StatusPage {
            password_hash: None,
            ..first
        };
        assert!(!unlocks(key, &public, &value));
    }
}
