//! Where the time of one HTTP exchange went, in blackbox_exporter's phases: `resolve` (name
//! resolution), `connect` (TCP and, for `https`, the TLS handshake: reqwest runs both inside
//! one connector, so they cannot be told apart from outside it), `processing` (request sent →
//! response headers) and `transfer` (the body). Over redirects each phase is summed, as
//! blackbox_exporter sums them, and the four add up to the whole exchange.
//!
//! reqwest resolves and connects inside its own connector, so the clocks are read there: a
//! resolver ([`TimedResolver`]) and a connector layer ([`TimedConnectLayer`]) note their
//! durations in the [`Phases`] of the check that is running, found through a task-local. The
//! connector runs on the check's own task because connections are never pooled (a pooled
//! connection's set-up would run on a background task, and these phases would read zero).
//!
//! Owns: the instants of one exchange. Must not: decide any outcome.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::super::networks::Networks;
use serde_json::{json, Value};

tokio::task_local! {
    static CURRENT: Arc<Mutex<Spent>>;
}

/// Time spent so far in the phases measured inside reqwest.
#[derive(Debug, Default, Clone, Copy)]
struct Spent {
    resolve: Duration,
    connect: Duration,
}

/// The clocks of one exchange: started before the request is built, read when it is over.
#[derive(Debug, Clone)]
pub struct Phases {
    spent: Arc<Mutex<Spent>>,
    started: Instant,
}

impl Phases {
    pub fn start() -> Self {
        Self {
            spent: Arc::default(),
            started: Instant::now(),
        }
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// Whether a connection (TCP and, for `https`, TLS) was made: the connector notes its time
    /// only once it has one. A timeout before that is an address that did not answer.
    pub fn connected(&self) -> bool {
        !self
            .spent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .connect
            .is_zero()
    }

    /// Runs `exchange` with this exchange's clocks visible to the resolver and the connector.
    pub async fn measure<F: Future>(&self, exchange: F) -> F::Output {
        CURRENT.scope(Arc::clone(&self.spent), exchange).await
    }

    /// The phases as `meta.phases`, in milliseconds: `headers` is when the response headers
    /// arrived, `done` when the body was read to its end (or to the cap).
    pub fn to_meta(&self, headers: Instant, done: Option<Instant>) -> Value {
        let spent = *self.spent.lock().unwrap_or_else(|e| e.into_inner());
        let first_byte = headers.saturating_duration_since(self.started);
        let processing = first_byte.saturating_sub(spent.resolve + spent.connect);
        let mut phases = json!({
            "resolve_ms": millis(spent.resolve),
            "connect_ms": millis(spent.connect),
            "processing_ms": millis(processing),
        });
        if let Some(done) = done {
            phases["transfer_ms"] = json!(millis(done.saturating_duration_since(headers)));
        }
        phases
    }
}

fn millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}

/// Adds `elapsed` to the running exchange's phase, when a check is running on this task.
fn note(
    spent: Option<&Arc<Mutex<Spent>>>,
    elapsed: Duration,
    phase: fn(&mut Spent) -> &mut Duration,
) {
    if let Some(spent) = spent {
        let mut spent = spent.lock().unwrap_or_else(|e| e.into_inner());
        *phase(&mut spent) += elapsed;
    }
}

/// The system resolver (getaddrinfo on tokio's blocking pool, as reqwest's default), timed,
/// answering only the addresses the agent's network policy permits (`networks`). IP-literal
/// targets never reach it, and resolve in no time (`HttpClients` judges them).
#[derive(Debug, Default)]
pub struct TimedResolver {
    pub networks: Arc<Networks>,
}

impl Resolve for TimedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let spent = CURRENT.try_with(Arc::clone).ok();
        let host = name.as_str().to_string();
        let networks = self.networks.clone();
        Box::pin(async move {
            let started = Instant::now();
            let found = tokio::net::lookup_host((host.as_str(), 0)).await;
            // The connector's clock runs through resolution too; it is taken out there.
            note(spent.as_ref(), started.elapsed(), |s| &mut s.resolve);
            let addrs = networks
                .keep(found?.collect())
                .map_err(std::io::Error::other)?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// Wraps reqwest's connector (resolution, TCP, TLS) to time it; the resolver's share is
/// subtracted, so `connect` is TCP plus the TLS handshake.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimedConnectLayer;

impl<S> tower_layer::Layer<S> for TimedConnectLayer {
    type Service = TimedConnect<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TimedConnect(inner)
    }
}

#[derive(Debug, Clone)]
pub struct TimedConnect<S>(S);

impl<S, Request> tower_service::Service<Request> for TimedConnect<S>
where
    S: tower_service::Service<Request>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let spent = CURRENT.try_with(Arc::clone).ok();
        let connecting = self.0.call(request);
        Box::pin(async move {
            let started = Instant::now();
            let resolved_before = spent
                .as_ref()
                .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).resolve);
            let connected = connecting.await;
            let resolving =
                spent
                    .as_ref()
                    .zip(resolved_before)
                    .map_or(Duration::ZERO, |(s, before)| {
                        s.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .resolve
                            .saturating_sub(before)
                    });
            note(
                spent.as_ref(),
                started.elapsed().saturating_sub(resolving),
                |s| &mut s.connect,
            );
            connected
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::IntoFuture;

    #[test]
    fn phases_add_up_to_the_first_byte_and_never_go_negative() {
        let phases = Phases::start();
        {
            let mut spent = phases.spent.lock().unwrap();
            spent.resolve = Duration::from_millis(3);
            spent.connect = Duration::from_millis(10);
        }
        let headers = phases.started + Duration::from_millis(40);
        let meta = phases.to_meta(headers, Some(headers + Duration::from_millis(7)));
        assert_eq!(
            meta,
            json!({"resolve_ms": 3, "connect_ms": 10, "processing_ms": 27, "transfer_ms": 7})
        );
        // Clocks that disagree (a connect that outlasted the headers' instant) give zero,
        // not an underflow.
        let early = phases.to_meta(phases.started + Duration::from_millis(5), None);
        assert_eq!(early["processing_ms"], 0);
        assert!(early.get("transfer_ms").is_none());
    }

    #[tokio::test]
    async fn the_resolver_and_the_connector_are_timed_on_the_checks_task() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(
            axum::serve(
                listener,
                axum::Router::new().route("/", axum::routing::get(|| async { "ok" })),
            )
            .into_future(),
        );
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .dns_resolver(Arc::new(TimedResolver::default()))
            .connector_layer(TimedConnectLayer)
            .build()
            .unwrap();
        let phases = Phases::start();
        let url = format!("http://localhost:{port}/");
        let response = phases.measure(client.get(&url).send()).await.unwrap();
        assert!(response.status().is_success());
        let spent = *phases.spent.lock().unwrap();
        assert!(spent.resolve > Duration::ZERO, "{spent:?}");
        assert!(spent.connect > Duration::ZERO, "{spent:?}");
        // Outside a measured exchange nothing is noted, and nothing fails.
        assert!(client.get(&url).send().await.unwrap().status().is_success());
    }
}
