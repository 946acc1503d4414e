//! A notification channel as central keeps it: what the operator entered (`ChannelSpec`,
//! secrets included: only delivery and the secret-keeping rules read them) and when, and a
//! channel as alerting picks who to tell (`Recipient`). The store makes both from its rows
//! (`store::channel_rows`). Must not: hold a rule (who is told of what is
//! `service::channels::tells`), deliver (`notify`) or show a secret (views are
//! `service::channels`').

use shared_proto::notifications::{ChannelKind, ChannelSpec};

#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    pub id: String,
    pub spec: ChannelSpec,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A channel as alerting picks recipients: only what deciding who is told needs. Read from
/// every channel, whether the rest of it reads or not, so that a channel whose settings a
/// newer replica wrote is still told (and its delivery, or the replica that reads it, says
/// what became of each message) instead of being silently passed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    pub id: String,
    /// `None`: a kind this central does not know.
    pub kind: Option<ChannelKind>,
    pub default: bool,
    /// The tags whose monitors tell it (empty when its stored list does not read).
    pub tags: Vec<String>,
}

impl Channel {
    /// This channel as a recipient.
    pub fn recipient(&self) -> Recipient {
        Recipient {
            id: self.id.clone(),
            kind: Some(self.spec.kind),
            default: self.spec.default,
            tags: self.spec.tags.clone(),
        }
    }
}
