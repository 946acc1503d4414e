//! A status page as central keeps it: what the operator wrote (sections, visibility, domain,
//! automatic incidents, logo) with its password as a hash, and the logo decoded once as
//! visitors are sent it. The store makes one from its row (`store::status_pages`); services
//! decide what it shows and to whom (`service::status_pages`). Must not: hold a rule or
//! render anything.

use std::sync::Arc;

use shared_proto::status_pages::{AutoIncidents, StatusPageSection, Visibility};
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct StatusPage {
    pub id: Uuid,
    pub slug: String,
    pub title: String,
    pub description: Option<String>,
    pub sections: Vec<StatusPageSection>,
    pub visibility: Visibility,
    pub password_hash: Option<String>,
    pub domain: Option<String>,
    pub auto_incidents: AutoIncidents,
    /// The logo as given (its `data:` URL), and decoded; `None` also for a stored one that no
    /// longer decodes (checked when written), which is not shown.
    pub logo: Option<(String, Arc<PageLogo>)>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A page's logo as visitors are sent it.
#[derive(Debug)]
pub struct PageLogo {
    pub content_type: &'static str,
    pub bytes: bytes::Bytes,
    /// A strong `ETag` of the bytes, also in the logo's address on the page (`?v=`), so a
    /// new logo is a new address.
    pub etag: String,
}

impl PageLogo {
    /// The logo of a `data:` URL, and the URL; `None` if it does not decode.
    pub fn of(url: &str) -> Option<(String, Arc<PageLogo>)> {
        use sha2::Digest;
        let logo = shared_proto::status_pages::parse_logo("logo", url).ok()?;
        let digest = sha2::Sha256::digest(&logo.bytes);
        let decoded = PageLogo {
            content_type: logo.content_type,
            etag: format!("\"{}\"", hex::encode(&digest[..12])),
            bytes: logo.bytes.into(),
        };
        Some((url.to_string(), Arc::new(decoded)))
    }
}
