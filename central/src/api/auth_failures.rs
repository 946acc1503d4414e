//! Limits on failed authentication: every `401` answered to a request without credentials that
//! check out in memory (the unauthenticated pool: logins, registrations, token exchanges, bad
//! bearer tokens or cookies) costs its client one token of a bucket
//! (`CENTRAL_AUTH_FAILURES_PER_MINUTE`, as a burst and a rate per minute) and one of a bucket
//! shared by everyone (`CENTRAL_AUTH_FAILURES_GLOBAL_PER_MINUTE`, against guessing spread over
//! many addresses). While either is empty, that client's (or everyone's) unauthenticated
//! requests are answered `429` with `Retry-After` before any work is done. Pollers and operators
//! whose credentials check out are never held back, even from a blocked address: they are not
//! in the unauthenticated pool. Each lockout is logged once, when it starts.
//!
//! Cost: O(1) per request; memory bounded as `service::buckets::Buckets`'.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use crate::error::ApiError;
use crate::service::buckets::Buckets;

/// The key of the bucket everyone shares.
const EVERYONE: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

pub struct AuthFailures {
    per_client: Option<Buckets<IpAddr>>,
    global: Option<Buckets<IpAddr>>,
}

impl AuthFailures {
    /// Failures allowed per minute (and in a burst) per client and from everyone; 0 turns a
    /// limit off.
    pub fn new(per_client: u32, global: u32) -> Self {
        let buckets = |per_minute: u32| {
            (per_minute > 0)
                .then(|| Buckets::new(f64::from(per_minute) / 60.0, f64::from(per_minute)))
        };
        Self {
            per_client: buckets(per_client),
            global: buckets(global),
        }
    }

    /// Refuses an unauthenticated request from `client` while it, or everyone, is locked out.
    pub fn check(&self, client: Option<IpAddr>, now: Instant) -> Result<(), ApiError> {
        if let (Some(buckets), Some(client)) = (&self.per_client, client) {
            if let Err(wait) = buckets.check(client, now) {
                return Err(refusal(
                    format!("too many failed authentications from {client}"),
                    wait,
                ));
            }
        }
        if let Some(global) = &self.global {
            if let Err(wait) = global.check(EVERYONE, now) {
                return Err(refusal(
                    "too many failed authentications from everywhere at once".into(),
                    wait,
                ));
            }
        }
        Ok(())
    }

    /// Counts a failed authentication from `client`; logs the lockout it starts, if any (the
    /// failure that takes a bucket's last token).
    pub fn record(&self, client: Option<IpAddr>, now: Instant) {
        if let (Some(buckets), Some(client)) = (&self.per_client, client) {
            if matches!(buckets.take(client, now), Ok(left) if left < 1.0) {
                tracing::warn!(
                    %client,
                    "failed authentications: this client's unauthenticated requests are \
                     refused for {} s",
                    buckets.wait(client, now).as_secs().max(1)
                );
            }
        }
        if let Some(global) = &self.global {
            if matches!(global.take(EVERYONE, now), Ok(left) if left < 1.0) {
                tracing::warn!(
                    "failed authentications from everywhere: all unauthenticated requests \
                     (logins, registrations) are refused for {} s",
                    global.wait(EVERYONE, now).as_secs().max(1)
                );
            }
        }
    }
}

fn refusal(what: String, wait: Duration) -> ApiError {
    let seconds = wait.as_secs().max(1);
    ApiError::TooManyRequests {
        message: format!("{what}; retry in {seconds} s"),
        retry_after: seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn a_client_is_locked_out_after_its_failures_and_others_are_not() {
        let failures = AuthFailures::new(3, 0);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(failures.check(client("192.0.2.1"), t0).is_ok());
            failures.record(client("192.0.2.1"), t0);
        }
        let refused = failures.check(client("192.0.2.1"), t0).unwrap_err();
        assert!(
            matches!(
                &refused,
                ApiError::TooManyRequests {
                    retry_after: 20,
                    ..
                }
            ),
            "{refused:?}"
        );
        assert!(failures.check(client("192.0.2.2"), t0).is_ok());
        // Three a minute: one comes back after 20 s.
        assert!(failures
            .check(client("192.0.2.1"), t0 + Duration::from_secs(20))
            .is_ok());
    }

    #[test]
    fn failures_spread_over_many_clients_lock_everyone_out() {
        let failures = AuthFailures::new(100, 5);
        let t0 = Instant::now();
        for i in 0..5 {
            failures.record(client(&format!("198.51.100.{i}")), t0);
        }
        let refused = failures.check(client("203.0.113.9"), t0).unwrap_err();
        assert!(refused.to_string().contains("everywhere"), "{refused}");
    }

    #[test]
    fn zero_turns_a_limit_off() {
        let failures = AuthFailures::new(0, 0);
        let t0 = Instant::now();
        for _ in 0..1000 {
            failures.record(client("192.0.2.1"), t0);
        }
        assert!(failures.check(client("192.0.2.1"), t0).is_ok());
    }
}
