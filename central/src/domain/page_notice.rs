//! What a status page tells its subscribers, once for all of them (an incident's change, a
//! maintenance beginning or ending, a confirmation): written in the transaction of what it
//! tells, with a delivery for each confirmed subscriber (`store::status_subscribers`). Must
//! not: hold a rule or send.

use shared_proto::status_subscribers::NoticeContent;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageNotice {
    pub id: String,
    pub page_id: String,
    pub content: NoticeContent,
    pub created_at: i64,
}
