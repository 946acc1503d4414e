//! Load shedding: at most `CENTRAL_MAX_CONCURRENT_REQUESTS` requests are served at once, and
//! the next one is answered `503` with `Retry-After` at once, never queued without bound.
//! Assignment long polls, which wait by design, have their own cap (`LongPolls`).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

/// The path whose requests are exempt from the request cap (they use `LongPolls`).
pub const LONG_POLL_PATH: &str = "/api/poller/assignments";

/// Seconds a shed client is told to wait; agents add their own jitter.
const RETRY_AFTER_SECONDS: u64 = 1;

#[derive(Clone)]
pub struct RequestSlots(Arc<Semaphore>);

impl RequestSlots {
    pub fn new(capacity: u32) -> Self {
        Self(Arc::new(Semaphore::new(capacity as usize)))
    }
}

pub async fn shed(State(slots): State<RequestSlots>, request: Request, next: Next) -> Response {
    if request.uri().path() == LONG_POLL_PATH {
        return next.run(request).await;
    }
    match slots.0.clone().try_acquire_owned() {
        Ok(_slot) => next.run(request).await,
        Err(_) => ApiError::Overloaded {
            message: format!(
                "central is serving as many requests as it is allowed to; retry in \
                 {RETRY_AFTER_SECONDS} s"
            ),
            retry_after: RETRY_AFTER_SECONDS,
        }
        .into_response(),
    }
}

/// Long polls held open at once; past the cap a long poll is answered without waiting.
pub struct LongPolls(Arc<Semaphore>);

impl LongPolls {
    pub fn new(capacity: u32) -> Self {
        Self(Arc::new(Semaphore::new(capacity as usize)))
    }

    /// A slot to wait in, if one is free.
    pub fn try_wait(&self) -> Option<OwnedSemaphorePermit> {
        self.0.clone().try_acquire_owned().ok()
    }
}
