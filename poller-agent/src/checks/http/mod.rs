//! `http`: a request whose status, body keywords, JSON value or health document must match.
//! `429` is rate limiting (neither up nor down); every other unexpected status, `503`
//! included, is down, with its `Retry-After` passed on to space the next check. With
//! `conditional`, the validators of the last answer that passed are sent, so an unchanged
//! resource costs a `304`. An accepted answer's body is always read to its end (or to
//! `MAX_BODY_BYTES`), whatever the assertions: a page is up when a person would have it, and
//! a body that stalls is down. The monitor's timeout covers the whole exchange, body included;
//! `latency_ms` is the whole exchange, and `meta.phases` says where the time went.
//! Header values are parsed in `target_headers`.

mod body;
mod health;
mod phases;
mod redirects;
#[cfg(test)]
mod tests;

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use shared_proto::poller_api::ResultStatus;
use shared_proto::settings::{BodyFormat, HttpSettings};
use tokio::time::Instant;

use self::body::{assert_body, asserts_on_body, read_body, BodyError};
use self::health::{has_list, health_json};
use self::phases::{Phases, TimedConnectLayer, TimedResolver};
use self::redirects::Follow;
use super::networks::{self, Networks};
use super::target_headers::{rate_budget, retry_after};
use super::{timeout_message, CheckOutcome, Validators};
use shared_proto::health::HealthMapping;

pub use self::body::MAX_BODY_BYTES;

/// One client per (verify TLS, which redirects to follow) pair: these are client-wide in
/// reqwest (`redirects` says which are followed).
/// Idle connections are not kept, so every check measures a fresh connection as a real user's
/// first request would (and its set-up runs on the check's task, where `phases` times it).
#[derive(Clone)]
pub struct HttpClients {
    /// `[verify TLS, skip verification]` × `Follow::ALL`.
    clients: Vec<reqwest::Client>,
    /// Judges IP-literal targets (the resolver judges names).
    networks: Arc<Networks>,
}

impl HttpClients {
    pub fn new(user_agent: &str, networks: Arc<Networks>) -> anyhow::Result<Self> {
        let build = |verify: bool, follow: Follow| {
            reqwest::Client::builder()
                .danger_accept_invalid_certs(!verify)
                .redirect(follow.policy(networks.clone()))
                // Checks go to their target directly: through a proxy from the environment
                // (`HTTP_PROXY`…) the proxy would resolve names, past the agent's network
                // policy, and its latency would be the check's.
                .no_proxy()
                .pool_max_idle_per_host(0)
                .dns_resolver(Arc::new(TimedResolver {
                    networks: networks.clone(),
                }))
                .connector_layer(TimedConnectLayer)
                .user_agent(user_agent)
                .build()
        };
        let mut clients = Vec::new();
        for verify in [true, false] {
            for follow in Follow::ALL {
                clients.push(build(verify, follow)?);
            }
        }
        Ok(Self { clients, networks })
    }

    fn client(&self, settings: &HttpSettings) -> &reqwest::Client {
        let index =
            usize::from(!settings.verify_tls) * Follow::ALL.len() + Follow::of(settings).index();
        &self.clients[index]
    }

    /// The whole exchange (connect, headers, body) is bounded by `timeout`.
    pub async fn check(
        &self,
        url: &str,
        settings: &HttpSettings,
        timeout: Duration,
        validators: Option<Validators>,
    ) -> CheckOutcome {
        let phases = Phases::start();
        let deadline = Instant::from_std(phases.started()) + timeout;
        let exchange = self.exchange(url, settings, validators, &phases, deadline, timeout);
        phases.measure(exchange).await
    }

    async fn exchange(
        &self,
        url: &str,
        settings: &HttpSettings,
        validators: Option<Validators>,
        phases: &Phases,
        deadline: Instant,
        timeout: Duration,
    ) -> CheckOutcome {
        if let Some(refusal) = url::Url::parse(url)
            .ok()
            .and_then(|u| redirects::refused_literal(&self.networks, &u))
        {
            return CheckOutcome::permanent(None, refusal, json!({}));
        }
        let method =
            reqwest::Method::from_bytes(settings.method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut request = self.client(settings).request(method, url);
        for (name, value) in &settings.headers {
            request = request.header(name, value);
        }
        if let Some(body) = &settings.body {
            request = request.body(body.clone());
        }
        if let (true, Some(v)) = (settings.conditional, &validators) {
            if let Some(etag) = &v.etag {
                request = request.header(reqwest::header::IF_NONE_MATCH, etag);
            }
            if let Some(modified) = &v.last_modified {
                request = request.header(reqwest::header::IF_MODIFIED_SINCE, modified);
            }
        }
        let started = phases.started();
        let response = match tokio::time::timeout_at(deadline, request.send()).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return request_failure(&e, started.elapsed()),
            // No connection within the timeout: the address did not answer (`unreachable`).
            Err(_) if !phases.connected() => {
                return CheckOutcome::unreachable(None, timeout_message(timeout))
            }
            Err(_) => return CheckOutcome::down(None, timeout_message(timeout), json!({})),
        };
        let headers_at = std::time::Instant::now();
        let code = response.status().as_u16();
        let first_byte = headers_at - started;
        let mut meta = json!({
            "status_code": code,
            "first_byte_ms": first_byte.as_millis() as u64,
            "phases": phases.to_meta(headers_at, None),
        });
        let now = SystemTime::now();
        let budget = rate_budget(response.headers(), now);
        let wait = retry_after(response.headers(), now);
        let with_target_state = |outcome: CheckOutcome| CheckOutcome {
            budget,
            retry_after: wait,
            ..outcome
        };

        if code == 304 && settings.conditional && validators.is_some() {
            // The validators came from an answer that passed every assertion: unchanged
            // content passes them still.
            meta["unchanged"] = json!(true);
            let mut outcome = CheckOutcome::up(first_byte, meta);
            outcome.fingerprint = validators.as_ref().map(fingerprint_of_validators);
            outcome.validators = validators;
            return with_target_state(outcome);
        }
        // What the target asked for; the engine decides when the next check really runs
        // (`meta.engine.next_due_at`).
        let wait_text = wait.map_or(String::new(), |d| {
            format!(", target asks to retry after {} s", d.as_secs())
        });
        if code == 429 && !settings.expected_status.contains(&429) {
            return with_target_state(CheckOutcome {
                status: ResultStatus::RateLimited,
                ..CheckOutcome::down(
                    Some(first_byte),
                    format!("rate limited (429){wait_text}"),
                    meta,
                )
            });
        }
        if !settings.accepts(code) {
            return with_target_state(
                unexpected_status(
                    settings, code, response, first_byte, meta, &wait_text, deadline,
                )
                .await,
            );
        }
        let new_validators = settings
            .conditional
            .then(|| validators_of(&response))
            .flatten();
        let body = read_body(response, deadline).await;
        let done = std::time::Instant::now();
        let elapsed = done - started;
        meta["phases"] = phases.to_meta(headers_at, Some(done));
        let mut outcome = match body {
            Ok(body) if asserts_on_body(settings) => {
                let mut outcome = assert_body(settings, &body, elapsed, meta);
                outcome.fingerprint = Some(fingerprint(code, &body.text));
                outcome
            }
            Ok(body) => {
                if body.truncated {
                    meta["body_truncated_at"] = json!(MAX_BODY_BYTES);
                }
                let mut outcome = CheckOutcome::up(elapsed, meta);
                // Without assertions the body's content is not what is watched: an answer
                // is "unchanged" when its validators (or its status) are.
                outcome.fingerprint = Some(match &new_validators {
                    Some(v) => fingerprint_of_validators(v),
                    None => fingerprint(code, ""),
                });
                outcome
            }
            Err(BodyError::Stalled { read }) => CheckOutcome::down(
                Some(elapsed),
                format!(
                    "body stalled: not finished within the {} ms timeout, {read} bytes read \
                     (status {code} after {} ms)",
                    timeout.as_millis(),
                    first_byte.as_millis()
                ),
                meta,
            ),
            Err(BodyError::Failed { error, read }) => CheckOutcome::down(
                Some(elapsed),
                format!(
                    "reading body failed after {read} bytes: {}",
                    error_chain(&error)
                ),
                meta,
            ),
        };
        if outcome.status == ResultStatus::Up {
            outcome.validators = new_validators;
        }
        with_target_state(outcome)
    }
}

/// A status the monitor does not accept: down, with the health document's reasons when the
/// monitor reads one (health endpoints commonly answer 503 with the document that says why).
async fn unexpected_status(
    settings: &HttpSettings,
    code: u16,
    response: reqwest::Response,
    first_byte: Duration,
    mut meta: Value,
    wait_text: &str,
    deadline: Instant,
) -> CheckOutcome {
    let expected = if settings.expected_status.is_empty() {
        "2xx".to_string()
    } else {
        let codes: Vec<String> = settings
            .expected_status
            .iter()
            .map(u16::to_string)
            .collect();
        codes.join("/")
    };
    let mut message = format!("expected {expected}, got {code}{wait_text}");
    if settings.format == BodyFormat::HealthJson {
        let document = read_body(response, deadline)
            .await
            .ok()
            .and_then(|body| serde_json::from_str::<Value>(&body.text).ok());
        let default_mapping = HealthMapping::default();
        let mapping = settings
            .health_mapping
            .as_deref()
            .unwrap_or(&default_mapping);
        if let Some(document) = document.filter(|d| has_list(d, mapping)) {
            let report = health_json(&document, mapping);
            report.fill(&mut meta);
            if let Some(failure) = report.failure {
                message = format!("{message}; {failure}");
            }
        }
    }
    // Credentials will not fix themselves by retrying.
    if code == 401 || code == 403 {
        CheckOutcome::permanent(Some(first_byte), message, meta)
    } else {
        CheckOutcome::down(Some(first_byte), message, meta)
    }
}

fn fingerprint(code: u16, body: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (code, body).hash(&mut hasher);
    hasher.finish()
}

fn fingerprint_of_validators(validators: &Validators) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (&validators.etag, &validators.last_modified).hash(&mut hasher);
    hasher.finish()
}

fn validators_of(response: &reqwest::Response) -> Option<Validators> {
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let validators = Validators {
        etag: header(reqwest::header::ETAG),
        last_modified: header(reqwest::header::LAST_MODIFIED),
    };
    (validators.etag.is_some() || validators.last_modified.is_some()).then_some(validators)
}

/// Every cause of an error, joined: reqwest's own message alone rarely says what happened.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(e) = source {
        parts.push(e.to_string());
        source = e.source();
    }
    parts.join(": ")
}

/// One line, classified: `connection refused` (transient), `dns: name does not resolve`
/// (permanent), `certificate invalid: …` (permanent).
fn request_failure(error: &reqwest::Error, elapsed: Duration) -> CheckOutcome {
    let mut chain = Vec::new();
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = source {
        chain.push(e.to_string());
        source = e.source();
    }
    let deepest = chain.last().cloned().unwrap_or_default();
    let all = chain.join(": ").to_ascii_lowercase();
    if let Some(refusal) = chain.iter().find(|e| e.starts_with(networks::REFUSED)) {
        CheckOutcome::permanent(None, refusal.clone(), json!({}))
    } else if all.contains("connection refused") {
        CheckOutcome::unreachable(Some(elapsed), "connection refused")
    } else if all.contains("name or service not known")
        || all.contains("no such host")
        || all.contains("nodename nor servname")
    {
        CheckOutcome::permanent(None, "dns: name does not resolve", json!({}))
    } else if all.contains("certificate") || all.contains("invalid peer") {
        CheckOutcome::permanent(
            Some(elapsed),
            format!("certificate invalid: {deepest}"),
            json!({}),
        )
    } else if error.is_connect() {
        CheckOutcome::unreachable(Some(elapsed), format!("connect failed: {deepest}"))
    } else {
        CheckOutcome::down(Some(elapsed), deepest, json!({}))
    }
}
