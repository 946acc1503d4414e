//! What central keeps of one result: its message and `meta` bounded in size, NULs replaced
//! (PostgreSQL's texts cannot hold one), and what `meta` tells central (the next check, a
//! health document's dependencies) read out once. Must not: decide whether the result stands
//! (`upload`) or store it.

use serde_json::{json, Value};
use shared_proto::engine_meta::EngineMeta;
use shared_proto::poller_api::{CheckResult, MAX_RESULT_META_BYTES, MAX_RESULT_MSG_LEN};
use shared_proto::settings::MAX_DELIBERATE_DELAY_MS;

use crate::store::NewResult;

/// A result cut to what central keeps of one (`msg`, `meta`), for a result kept outside the
/// results table (a `test` command's).
pub(in crate::service) fn bounded_result(mut result: CheckResult) -> CheckResult {
    bound_msg(&mut result.msg);
    result.meta = bounded_meta(result.meta).0;
    result
}

/// What a NUL becomes: PostgreSQL's text and `jsonb` cannot hold one, and a poller's text (a
/// target's error, a health document's) may carry it. Refusing the result would stall the
/// poller's queue behind it; the character is replaced instead.
const NUL_STAND_IN: &str = "\u{FFFD}";

fn bound_msg(msg: &mut String) {
    if msg.contains('\0') {
        *msg = msg.replace('\0', NUL_STAND_IN);
    }
    if msg.len() > MAX_RESULT_MSG_LEN {
        let cut = (0..=MAX_RESULT_MSG_LEN)
            .rev()
            .find(|i| msg.is_char_boundary(*i))
            .unwrap_or(0);
        msg.truncate(cut);
    }
}

pub(super) fn new_result(result: CheckResult, region: Option<String>) -> NewResult {
    let mut msg = result.msg;
    bound_msg(&mut msg);
    let ts = result.ts.timestamp_millis();
    let (meta, meta_text) = bounded_meta(result.meta);
    NewResult {
        id: result.id.to_string(),
        monitor_id: result.monitor_id.to_string(),
        region,
        ts,
        status: result.status,
        latency_ms: result.latency_ms.map(|l| l as i64),
        // The agent's word for when it checks next, believed up to the longest delay a setting
        // allows: a later one would keep a silent monitor from ever turning stale.
        next_due_at: EngineMeta::of(&meta)
            .and_then(|engine| engine.next_due_at)
            .map(|t| {
                t.timestamp_millis()
                    .min(ts.saturating_add(MAX_DELIBERATE_DELAY_MS as i64))
            }),
        dependencies: crate::service::dependencies::rules::report_of(&meta),
        msg,
        meta: meta_text,
    }
}

/// `meta` as kept: whole up to `MAX_RESULT_META_BYTES`, else a note of its size with its
/// `engine` part (when that alone fits), so that one result cannot cost central more than a
/// few dozen KiB however much a target or a poller put in it. With its JSON text (made once:
/// this runs for every result).
fn bounded_meta(meta: Value) -> (Value, String) {
    let text = meta.to_string();
    // Serialised, a NUL is always this escape: only then is the value walked.
    let (meta, text) = if text.contains("\\u0000") {
        let meta = without_nul(meta);
        let text = meta.to_string();
        (meta, text)
    } else {
        (meta, text)
    };
    let size = text.len();
    if size <= MAX_RESULT_META_BYTES {
        return (meta, text);
    }
    let mut kept = serde_json::Map::new();
    kept.insert(
        "meta_dropped".into(),
        json!({"bytes": size, "limit": MAX_RESULT_META_BYTES}),
    );
    if let Some(engine) = meta
        .get("engine")
        .filter(|e| e.to_string().len() <= MAX_RESULT_META_BYTES / 2)
    {
        kept.insert("engine".into(), engine.clone());
    }
    let kept = Value::Object(kept);
    let text = kept.to_string();
    (kept, text)
}

/// `value` with every NUL in its texts and keys replaced (`NUL_STAND_IN`).
fn without_nul(value: Value) -> Value {
    let clean = |text: String| {
        if text.contains('\0') {
            text.replace('\0', NUL_STAND_IN)
        } else {
            text
        }
    };
    match value {
        Value::String(text) => Value::String(clean(text)),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nul).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| (clean(key), without_nul(value)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    #[test]
    fn nuls_are_replaced_in_the_message_and_every_text_of_meta() {
        let mut meta_result = result(json!({"dependencies": [
            {"name": "db", "healthy": false, "error": "a\u{0}b", "contact": {"k\u{0}": ["\u{0}"]}}
        ]}));
        meta_result.msg = "unhealthy dependencies: db (a\u{0}b)".into();
        let kept = new_result(meta_result, None);
        assert!(!kept.msg.contains('\0'), "{}", kept.msg);
        assert!(!kept.meta.contains("\\u0000"), "{}", kept.meta);
        let report = kept.dependencies.unwrap();
        assert_eq!(report.items[0].error.as_deref(), Some("a\u{FFFD}b"));
    }

    fn result(meta: Value) -> CheckResult {
        CheckResult {
            id: Uuid::new_v4(),
            monitor_id: Uuid::new_v4(),
            ts: "2026-11-24T10:00:00Z".parse().unwrap(),
            status: shared_proto::poller_api::ResultStatus::Up,
            latency_ms: Some(5),
            msg: String::new(),
            meta,
        }
    }

    #[test]
    fn a_large_meta_is_replaced_by_its_size_and_keeps_the_engine_part() {
        let huge = "x".repeat(MAX_RESULT_META_BYTES + 1);
        let kept = new_result(
            result(json!({"body": huge, "engine": {"next_due_at": "2026-11-24T10:00:30Z"}})),
            None,
        );
        assert!(kept.meta.len() < 1_024, "{}", kept.meta.len());
        let meta: Value = serde_json::from_str(&kept.meta).unwrap();
        assert_eq!(meta["meta_dropped"]["limit"], MAX_RESULT_META_BYTES);
        assert_eq!(meta["engine"]["next_due_at"], "2026-11-24T10:00:30Z");
        let ts = "2026-11-24T10:00:00Z"
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap();
        assert_eq!(kept.next_due_at, Some(ts.timestamp_millis() + 30_000));

        let small = json!({"status_code": 200});
        assert_eq!(
            new_result(result(small.clone()), None).meta,
            small.to_string()
        );
    }

    #[test]
    fn an_announced_next_check_is_believed_up_to_the_longest_deliberate_delay() {
        let far = new_result(
            result(json!({"engine": {"next_due_at": "2100-01-01T00:00:00Z"}})),
            None,
        );
        let ts = "2026-11-24T10:00:00Z"
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap();
        assert_eq!(
            far.next_due_at,
            Some(ts.timestamp_millis() + MAX_DELIBERATE_DELAY_MS as i64)
        );
    }
}
