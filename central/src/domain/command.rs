//! An operator's command to a poller (check now, reset, test) as central keeps it, from the
//! moment it is issued until its poller answers it, once, or it expires. The store makes one
//! from its row (`store::commands`); `service::commands` decides who gets it and what an
//! answer means. Must not: hold a rule.

use shared_proto::poller_api::{CheckResult, CommandAction};

#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub id: String,
    pub poller_id: String,
    pub action: CommandAction,
    pub created_at: i64,
    pub expires_at: i64,
    /// When it was last handed to its poller.
    pub sent_at: Option<i64>,
    /// When its poller answered, whether it was done and what it said.
    pub acked_at: Option<i64>,
    pub done: Option<bool>,
    pub message: Option<String>,
    /// The result a `check` or `test` answered with.
    pub result: Option<CheckResult>,
}
