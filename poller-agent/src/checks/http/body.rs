//! A response's body: read to its end (or to `MAX_BODY_BYTES`) before the exchange's deadline,
//! and the assertions a monitor makes on it (keywords, JSON value, health document).
//! A target is untrusted: an endless or inflating body costs bounded memory, and a body that
//! trickles or stalls costs no more than the monitor's timeout.
//! Owns: reading and judging a body. Must not: send requests or classify statuses.

use std::time::Duration;

use serde_json::{json, Value};
use shared_proto::settings::{BodyFormat, HttpSettings};
use tokio::time::Instant;

use super::health::health_json;
use crate::checks::CheckOutcome;
use shared_proto::health::HealthMapping;

/// Bodies are read up to this many bytes (after decompression); assertions see this much.
/// Reaching it is not a failure: the check decides on what it read.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// How long a body that filled the cap exactly is given to show whether it ends there.
const CAP_GLANCE: Duration = Duration::from_millis(50);

pub struct Body {
    pub text: String,
    /// The body reached `MAX_BODY_BYTES` and did not end there at once; the rest was not read.
    pub truncated: bool,
}

#[derive(Debug)]
pub enum BodyError {
    /// The deadline passed before the body ended.
    Stalled { read: usize },
    /// The connection failed while the body was on its way.
    Failed { error: reqwest::Error, read: usize },
}

/// Reads the body (decompressed, when the target compressed it) until it ends, reaches
/// `MAX_BODY_BYTES`, or `deadline` passes.
pub async fn read_body(
    mut response: reqwest::Response,
    deadline: Instant,
) -> Result<Body, BodyError> {
    let mut body = Vec::new();
    let mut truncated = false;
    loop {
        let chunk = match tokio::time::timeout_at(deadline, response.chunk()).await {
            Err(_) => return Err(BodyError::Stalled { read: body.len() }),
            Ok(Err(error)) => {
                return Err(BodyError::Failed {
                    error,
                    read: body.len(),
                })
            }
            Ok(Ok(None)) => break,
            Ok(Ok(Some(chunk))) => chunk,
        };
        let room = MAX_BODY_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if chunk.len() >= room {
            // At the cap. Whether the body went on is worth only a glance: a body that ends
            // exactly here and then stalls must not hold the check to its deadline.
            let glance = deadline.min(Instant::now() + CAP_GLANCE);
            truncated = chunk.len() > room
                || !matches!(
                    tokio::time::timeout_at(glance, response.chunk()).await,
                    Ok(Ok(None))
                );
            break;
        }
    }
    Ok(Body {
        text: String::from_utf8_lossy(&body).into_owned(),
        truncated,
    })
}

/// Whether the monitor looks into the body (otherwise the body is read and only timed).
pub fn asserts_on_body(settings: &HttpSettings) -> bool {
    settings.keyword.is_some()
        || settings.keyword_absent.is_some()
        || settings.json_path.is_some()
        || settings.format == BodyFormat::HealthJson
}

pub fn assert_body(
    settings: &HttpSettings,
    body: &Body,
    latency: Duration,
    mut meta: Value,
) -> CheckOutcome {
    let text = body.text.as_str();
    if body.truncated {
        meta["body_truncated_at"] = json!(MAX_BODY_BYTES);
    }
    if let Some(keyword) = &settings.keyword {
        if !text.contains(keyword.as_str()) {
            let within = if body.truncated {
                format!(" in the first {} KiB", MAX_BODY_BYTES / 1024)
            } else {
                String::new()
            };
            return CheckOutcome::down(
                Some(latency),
                format!("keyword `{keyword}` not found{within}"),
                meta,
            );
        }
    }
    if let Some(keyword) = &settings.keyword_absent {
        if text.contains(keyword.as_str()) {
            return CheckOutcome::down(Some(latency), format!("keyword `{keyword}` present"), meta);
        }
    }
    let document = if settings.json_path.is_some() || settings.format == BodyFormat::HealthJson {
        match serde_json::from_str::<Value>(text) {
            Ok(document) => Some(document),
            Err(e) => {
                return CheckOutcome::down(Some(latency), format!("body is not JSON: {e}"), meta)
            }
        }
    } else {
        None
    };
    if let (Some(path), Some(document)) = (&settings.json_path, &document) {
        let found = document.pointer(path);
        let ok = match (&settings.json_expected, found) {
            (_, None) => false,
            (Some(expected), Some(value)) => value == expected,
            (None, Some(value)) => !value.is_null(),
        };
        if !ok {
            let got = found.map_or("missing".to_string(), shown_value);
            let want = settings
                .json_expected
                .as_ref()
                .map_or("present".to_string(), Value::to_string);
            return CheckOutcome::down(
                Some(latency),
                format!("json {path} is {got}, expected {want}"),
                meta,
            );
        }
    }
    if settings.format == BodyFormat::HealthJson {
        let default_mapping = HealthMapping::default();
        let mapping = settings
            .health_mapping
            .as_deref()
            .unwrap_or(&default_mapping);
        let report = health_json(document.as_ref().unwrap_or(&Value::Null), mapping);
        report.fill(&mut meta);
        return match report.failure {
            Some(message) => CheckOutcome::down(Some(latency), message, meta),
            None => CheckOutcome::up(latency, meta),
        };
    }
    CheckOutcome::up(latency, meta)
}

/// The most of a string value a message shows.
const SHOWN_CHARS: usize = 64;

/// A value found at `json_path`, as a result's message shows it: a scalar as JSON (a string
/// cut at `SHOWN_CHARS`), an object or an array by its size only. A message is stored and
/// shown to every viewer, and a test run answers with it: a path such as `""` must not make
/// it a copy of the target's document.
fn shown_value(value: &Value) -> String {
    match value {
        Value::Object(fields) => format!("an object of {} fields", fields.len()),
        Value::Array(items) => format!("an array of {} items", items.len()),
        Value::String(text) if text.chars().count() > SHOWN_CHARS => {
            let cut: String = text.chars().take(SHOWN_CHARS).collect();
            format!(
                "{}… ({} characters)",
                Value::String(cut),
                text.chars().count()
            )
        }
        scalar => scalar.to_string(),
    }
}

#[cfg(test)]
mod shown_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_found_value_is_shown_by_its_size_when_it_is_a_document() {
        assert_eq!(shown_value(&json!("ok")), "\"ok\"");
        assert_eq!(shown_value(&json!(3)), "3");
        assert_eq!(
            shown_value(&json!({"AccessKeyId": "x", "SecretAccessKey": "y"})),
            "an object of 2 fields"
        );
        assert_eq!(shown_value(&json!([1, 2])), "an array of 2 items");
        let long = "k".repeat(100);
        let shown = shown_value(&json!(long));
        assert!(
            shown.ends_with("… (100 characters)") && shown.len() < 90,
            "{shown}"
        );
    }
}
