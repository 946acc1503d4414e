//! The time a request's body has to arrive (`CENTRAL_REQUEST_TIMEOUT`, counted from when its
//! headers did): a body still coming after it fails the read, and the request is answered
//! `408`. Only the reading is timed, never the handler's own work, so a deadline cannot cut a
//! handler off half-way (a registration that spent its one-time token, an ingest mid-commit).
//!
//! Owns the body wrapper only; `pools` applies it to every request it admits.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use hyper::body::Frame;
use tokio::time::Sleep;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Whether a request's body missed its deadline (read after the handler answered).
#[derive(Clone, Default)]
pub struct Missed(Arc<AtomicBool>);

impl Missed {
    pub fn happened(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// `body`, failing its next read once `within` has passed.
pub fn limit(body: Body, within: Duration) -> (Body, Missed) {
    let missed = Missed::default();
    let timed = Timed {
        inner: body,
        deadline: Box::pin(tokio::time::sleep(within)),
        missed: missed.clone(),
    };
    (Body::new(timed), missed)
}

struct Timed {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    missed: Missed,
}

impl HttpBody for Timed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.missed.0.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(
                "the request body did not arrive within CENTRAL_REQUEST_TIMEOUT".into(),
            )));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_that_arrives_in_time_is_read_whole_and_a_late_one_fails() {
        let (body, missed) = limit(Body::from("all here"), Duration::from_millis(50));
        let read = axum::body::to_bytes(body, 1024).await.unwrap();
        assert_eq!(&read[..], b"all here");
        assert!(!missed.happened());

        let (sender, never) = tokio::sync::mpsc::channel::<Result<Bytes, BoxError>>(1);
        sender.send(Ok(Bytes::from_static(b"part"))).await.unwrap();
        let stream = tokio_stream_from(never);
        let (body, missed) = limit(Body::from_stream(stream), Duration::from_millis(50));
        let started = std::time::Instant::now();
        assert!(axum::body::to_bytes(body, 1024).await.is_err());
        assert!(missed.happened());
        assert!(started.elapsed() >= Duration::from_millis(50));
        drop(sender);
    }

    /// A stream of what the channel receives (the sender is kept open: the rest never comes).
    fn tokio_stream_from(
        mut receiver: tokio::sync::mpsc::Receiver<Result<Bytes, BoxError>>,
    ) -> impl futures_util::Stream<Item = Result<Bytes, BoxError>> {
        futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
    }
}
