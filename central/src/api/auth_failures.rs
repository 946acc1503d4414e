//! Limits on failed authentication. Every `401` costs its client one token of its buckets
//! (`CENTRAL_AUTH_FAILURES_PER_MINUTE`, as a burst and a rate per minute), and one of a bucket
//! shared by everyone (`CENTRAL_AUTH_FAILURES_GLOBAL_PER_MINUTE`, against guessing spread over
//! many addresses). A client whose buckets are empty has its requests without credentials
//! that check out in memory answered `429` with `Retry-After` before any work is done.
//!
//! The shared bucket only slows guessing; it never locks out a person with valid credentials:
//! during a flood (from the moment it is empty until it has refilled to half, so a flood
//! does not flicker off a tenth of a second after each failure, when one token has come
//! back), each client may fail once a minute (its `strict` buckets, which every
//! failure also spends), so a fresh address still gets its first try (a valid password or
//! token goes through), while a thousand guessing addresses get a thousand guesses a minute
//! instead of ten thousand. Callers whose credentials check out cheaply (sessions, API keys,
//! access tokens, refresh tokens) are not held back at all: `pools` does not ask.
//!
//! A client is an IPv4 address or an IPv6 /64. While the shared bucket is empty (and always
//! when there is none, `CENTRAL_AUTH_FAILURES_GLOBAL_PER_MINUTE=0`), an IPv6 client is also
//! counted under its /56 and /48, each with a strict bucket four times the one
//! below: one holder of a /48 then has 65,536 /64s, not 65,536 budgets. (Only then: in quiet
//! times a neighbour in the same /48 cannot lock a /64 out, and the shared bucket bounds the
//! whole; during a flood a /48 that guesses waits as one client.)
//! Each lockout is logged once, when it starts.
//!
//! Cost: O(1) per request; memory bounded as `service::buckets::Buckets`'.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::ApiError;
use crate::service::buckets::Buckets;
use crate::service::error::ServiceError;

/// The key of the bucket everyone shares.
const EVERYONE: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// The IPv6 prefixes a client is also counted under, beyond its /64, each allowed four times
/// the failures of the one before.
const WIDER_IPV6: [u8; 2] = [56, 48];

/// How much larger each wider IPv6 prefix's bucket is than the one below it.
const WIDER_FACTOR: f64 = 4.0;

/// Failures per minute allowed to one client while the shared bucket is empty.
const STRICT_PER_MINUTE: f64 = 1.0;

/// A bucket per client key at each level: the client itself, then its wider IPv6 prefixes.
struct Levels(Vec<Buckets<IpAddr>>);

impl Levels {
    /// `depth` levels: 1 counts the client alone, 3 its /56 and /48 too.
    fn new(per_minute: f64, depth: usize) -> Self {
        Levels(
            (0..depth.min(WIDER_IPV6.len() + 1) as i32)
                .map(|level| {
                    let allowed = per_minute * WIDER_FACTOR.powi(level);
                    Buckets::new(allowed / 60.0, allowed)
                })
                .collect(),
        )
    }

    /// Each level's bucket with the key it counts `client` under.
    fn keyed(&self, client: IpAddr) -> impl Iterator<Item = (&Buckets<IpAddr>, IpAddr)> {
        self.0
            .iter()
            .zip(keys(client))
            .filter_map(|(buckets, key)| key.map(|key| (buckets, key)))
    }

    /// The key whose bucket is empty, and how long until it has a token, if any is.
    fn empty(&self, client: IpAddr, now: Instant) -> Option<(IpAddr, Duration)> {
        self.keyed(client)
            .find_map(|(buckets, key)| buckets.check(key, now).err().map(|wait| (key, wait)))
    }

    /// Spends a token at each level; the keys whose last token this was.
    fn spend(&self, client: IpAddr, now: Instant) -> Vec<(IpAddr, Duration)> {
        self.keyed(client)
            .filter(|(buckets, key)| matches!(buckets.take(*key, now), Ok(left) if left < 1.0))
            .map(|(buckets, key)| (key, buckets.wait(key, now)))
            .collect()
    }
}

/// The keys `client` (a `client_key`) is counted under: itself, then for IPv6 its /56 and /48.
fn keys(client: IpAddr) -> [Option<IpAddr>; 3] {
    match client {
        IpAddr::V4(_) => [Some(client), None, None],
        IpAddr::V6(v6) => {
            let prefix = |bits: u8| {
                let mask = !((1u128 << (128 - u32::from(bits))) - 1);
                Some(IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask)))
            };
            [Some(client), prefix(WIDER_IPV6[0]), prefix(WIDER_IPV6[1])]
        }
    }
}

pub struct AuthFailures {
    per_client: Option<Levels>,
    /// Consulted only during a flood.
    strict: Option<Levels>,
    global: Option<Buckets<IpAddr>>,
    /// The shared bucket's size: a flood ends when half of it is back.
    global_burst: f64,
    /// Set when the shared bucket empties, cleared when it is half full again.
    flood: AtomicBool,
}

impl AuthFailures {
    /// Failures allowed per minute (and in a burst) per client and from everyone; 0 turns a
    /// limit off.
    pub fn new(per_client: u32, global: u32) -> Self {
        Self {
            // Without a shared budget there is no flood mode: the /56 and /48 are then counted
            // always, or a /48 would have 65,536 budgets with nothing above them.
            per_client: (per_client > 0).then(|| {
                Levels::new(
                    f64::from(per_client),
                    if global > 0 { 1 } else { WIDER_IPV6.len() + 1 },
                )
            }),
            strict: (global > 0).then(|| Levels::new(STRICT_PER_MINUTE, WIDER_IPV6.len() + 1)),
            global: (global > 0).then(|| Buckets::new(f64::from(global) / 60.0, f64::from(global))),
            global_burst: f64::from(global),
            flood: AtomicBool::new(false),
        }
    }

    /// Whether failures come from everywhere: from the moment the shared bucket is empty
    /// until it has refilled to half (at the default 600 a minute, 30 s without failures).
    fn flooded(&self, now: Instant) -> bool {
        let Some(global) = &self.global else {
            return false;
        };
        match global.check(EVERYONE, now) {
            Err(_) => {
                self.flood.store(true, Ordering::Relaxed);
                true
            }
            Ok(left) if left >= self.global_burst / 2.0 => {
                self.flood.store(false, Ordering::Relaxed);
                false
            }
            Ok(_) => self.flood.load(Ordering::Relaxed),
        }
    }

    /// Refuses a request from `client` while its buckets are empty, or, while everyone's is,
    /// its strict ones.
    pub fn check(&self, client: Option<IpAddr>, now: Instant) -> Result<(), ApiError> {
        let Some(client) = client else {
            return Ok(());
        };
        if let Some((key, wait)) = self.per_client.as_ref().and_then(|l| l.empty(client, now)) {
            return Err(refusal(
                format!("too many failed authentications from {key}"),
                wait,
            ));
        }
        if self.flooded(now) {
            if let Some((key, wait)) = self.strict.as_ref().and_then(|l| l.empty(client, now)) {
                return Err(refusal(
                    format!(
                        "too many failed authentications from everywhere at once: each client \
                         may fail once a minute until they stop, and {key} has"
                    ),
                    wait,
                ));
            }
        }
        Ok(())
    }

    /// Counts a failed authentication from `client`; logs the lockout it starts, if any (the
    /// failure that takes a bucket's last token).
    pub fn record(&self, client: Option<IpAddr>, now: Instant) {
        if let (Some(levels), Some(client)) = (&self.per_client, client) {
            for (key, wait) in levels.spend(client, now) {
                tracing::warn!(
                    client = %key,
                    "failed authentications: this client's requests without valid \
                     credentials are refused for {} s",
                    wait.as_secs().max(1)
                );
            }
        }
        if let (Some(levels), Some(client)) = (&self.strict, client) {
            // A whole prefix (a /56, a /48) spent: worth a line, since it holds back every
            // client in it while the flood lasts.
            for (key, wait) in levels.spend(client, now) {
                if key != client {
                    tracing::warn!(
                        prefix = %key,
                        "failed authentications from many clients of one IPv6 prefix: while \
                         failures come from everywhere, its clients are refused for {} s",
                        wait.as_secs().max(1)
                    );
                }
            }
        }
        if let Some(global) = &self.global {
            if matches!(global.take(EVERYONE, now), Ok(left) if left < 1.0) {
                self.flood.store(true, Ordering::Relaxed);
                tracing::warn!(
                    "failed authentications from everywhere: each client may fail once a \
                     minute for {} s (valid credentials still go through)",
                    global.wait(EVERYONE, now).as_secs().max(1)
                );
            }
        }
    }
}

fn refusal(what: String, wait: Duration) -> ApiError {
    let seconds = wait.as_secs().max(1);
    ApiError::Service(ServiceError::RateLimited {
        message: format!("{what}; retry in {seconds} s"),
        retry_after: seconds,
    })
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
                ApiError::Service(ServiceError::RateLimited {
                    retry_after: 20,
                    ..
                })
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
    fn failures_spread_over_many_clients_slow_everyone_to_one_a_minute_but_lock_out_nobody() {
        let failures = AuthFailures::new(100, 5);
        let t0 = Instant::now();
        for i in 0..5 {
            failures.record(client(&format!("198.51.100.{i}")), t0);
        }
        // A fresh client gets its first try (a valid credential goes through)…
        assert!(failures.check(client("203.0.113.9"), t0).is_ok());
        failures.record(client("203.0.113.9"), t0);
        // …and, failing, waits a minute, as do the guessers.
        let refused = failures.check(client("203.0.113.9"), t0).unwrap_err();
        assert!(refused.to_string().contains("everywhere"), "{refused}");
        assert!(failures.check(client("198.51.100.1"), t0).is_err());
        assert!(failures
            .check(client("198.51.100.1"), t0 + Duration::from_secs(61))
            .is_ok());
    }

    #[test]
    fn a_flood_lasts_until_half_the_shared_budget_is_back() {
        let failures = AuthFailures::new(100, 60);
        let t0 = Instant::now();
        for i in 0..60 {
            failures.record(client(&format!("198.51.100.{i}")), t0);
        }
        // Five tokens back (5 s at one a second): still a flood, so a guesser that failed
        // once waits its minute, not the next token.
        let t5 = t0 + Duration::from_secs(5);
        assert!(failures.check(client("203.0.113.9"), t5).is_ok());
        failures.record(client("203.0.113.9"), t5);
        let refused = failures.check(client("203.0.113.9"), t5).unwrap_err();
        assert!(refused.to_string().contains("everywhere"), "{refused}");
        // Half the budget back (30 s): the flood is over, each client has its own limit.
        assert!(failures
            .check(client("203.0.113.9"), t5 + Duration::from_secs(30))
            .is_ok());
    }

    #[test]
    fn in_quiet_times_a_64_is_judged_alone() {
        let failures = AuthFailures::new(2, 1000);
        let t0 = Instant::now();
        for n in 0..40 {
            let key = client(&format!("2001:db8:0:{n:x}::"));
            failures.record(key, t0);
            failures.record(key, t0);
            assert!(failures.check(key, t0).is_err(), "its own budget is spent");
        }
        assert!(
            failures.check(client("2001:db8:0:ff::"), t0).is_ok(),
            "a neighbour in the same /48 is not held back"
        );
    }

    #[test]
    fn during_a_flood_an_ipv6_holder_of_many_64s_is_one_client_at_its_56_and_48() {
        let failures = AuthFailures::new(100, 1);
        let t0 = Instant::now();
        // One failure elsewhere spends the shared bucket: a flood.
        failures.record(client("192.0.2.1"), t0);
        // One failure from each of four /64s of one /56: its strict allowance of 4.
        for n in 0x10..0x14 {
            let key = client(&format!("2001:db8:0:{n:x}::"));
            assert!(failures.check(key, t0).is_ok(), "{key:?}");
            failures.record(key, t0);
        }
        let refused = failures.check(client("2001:db8:0:19::"), t0).unwrap_err();
        assert!(refused.to_string().contains("2001:db8::"), "{refused}");
        // Another /56 of the same /48 is not held back until the /48's 16 are spent.
        assert!(failures.check(client("2001:db8:0:100::"), t0).is_ok());
        for n in 0..12 {
            failures.record(client(&format!("2001:db8:0:{:x}00::", n + 1)), t0);
        }
        let refused = failures.check(client("2001:db8:0:f00::"), t0).unwrap_err();
        assert!(refused.to_string().contains("2001:db8::"), "{refused}");
        assert!(
            failures.check(client("2001:db8:1::"), t0).is_ok(),
            "another /48"
        );
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
