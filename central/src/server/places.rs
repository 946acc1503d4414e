//! Places counted in all and per client, so that one client cannot take everyone's: the
//! connections central holds (`CENTRAL_MAX_CONNECTIONS`, `CENTRAL_MAX_CONNECTIONS_PER_CLIENT`)
//! and the requests it serves. A client is what `client_addr::client_key` makes of an address
//! (or, for operators, the principal whose credential a request carries: any key type); a
//! place taken for no client (a trusted proxy's connection, which everyone behind it shares)
//! counts only in the total.
//!
//! Owns only the counting; callers decide what to do when refused. Cost: O(1) per place taken
//! or given back, memory proportional to the clients holding places right now.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Which cap a place was refused by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every place is taken.
    Total,
    /// This client holds as many places as one client may.
    PerClient,
}

impl Refused {
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::Total => "total",
            Refused::PerClient => "per_client",
        }
    }
}

struct Counts<K> {
    total: usize,
    per_client: HashMap<K, usize>,
}

impl<K> Default for Counts<K> {
    fn default() -> Self {
        Self {
            total: 0,
            per_client: HashMap::new(),
        }
    }
}

#[derive(Clone)]
pub struct Places<K = IpAddr> {
    counts: Arc<Mutex<Counts<K>>>,
    max_total: usize,
    max_per_client: usize,
}

/// One place taken; dropping it gives it back.
pub struct Place<K: Eq + Hash = IpAddr> {
    counts: Arc<Mutex<Counts<K>>>,
    client: Option<K>,
}

impl<K: Eq + Hash + Clone> Places<K> {
    pub fn new(max_total: usize, max_per_client: usize) -> Self {
        Self {
            counts: Arc::default(),
            max_total,
            max_per_client,
        }
    }

    /// Takes a place for `client` (a `client_key`; `None` counts only in the total), or says
    /// which cap is reached.
    pub fn take(&self, client: Option<K>) -> Result<Place<K>, Refused> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if counts.total >= self.max_total {
            return Err(Refused::Total);
        }
        if let Some(client) = client.clone() {
            let held = counts.per_client.entry(client).or_default();
            if *held >= self.max_per_client {
                return Err(Refused::PerClient);
            }
            *held += 1;
        }
        counts.total += 1;
        Ok(Place {
            counts: self.counts.clone(),
            client,
        })
    }

    /// Places taken now.
    pub fn taken(&self) -> usize {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).total
    }
}

impl<K: Eq + Hash> Drop for Place<K> {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts.total -= 1;
        if let Some(client) = &self.client {
            if let Some(held) = counts.per_client.get_mut(client) {
                *held -= 1;
                if *held == 0 {
                    // Forgotten when idle, so memory follows the clients connected now.
                    counts.per_client.remove(client);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::client_addr::client_key;
    use super::*;

    fn client(text: &str) -> Option<IpAddr> {
        Some(client_key(text.parse().unwrap()))
    }

    #[test]
    fn one_client_cannot_take_more_than_its_share_and_places_come_back() {
        let places = Places::new(5, 2);
        let a1 = places.take(client("192.0.2.1")).unwrap();
        let _a2 = places.take(client("192.0.2.1")).unwrap();
        assert_eq!(
            places.take(client("192.0.2.1")).err(),
            Some(Refused::PerClient)
        );
        // The same /64 is the same client.
        let _b1 = places.take(client("2001:db8::1")).unwrap();
        let _b2 = places.take(client("2001:db8::2")).unwrap();
        assert_eq!(
            places.take(client("2001:db8::3")).err(),
            Some(Refused::PerClient)
        );
        let _c = places.take(client("192.0.2.3")).unwrap();
        assert_eq!(places.taken(), 5);
        assert_eq!(places.take(client("192.0.2.4")).err(), Some(Refused::Total));
        drop(a1);
        assert_eq!(places.taken(), 4);
        let _a3 = places.take(client("192.0.2.1")).unwrap();
    }

    #[test]
    fn places_for_no_client_count_only_in_the_total_and_idle_clients_are_forgotten() {
        let places = Places::new(10, 1);
        let held: Vec<_> = (0..5).map(|_| places.take(None).unwrap()).collect();
        let one = places.take(client("192.0.2.1")).unwrap();
        assert_eq!(places.taken(), 6);
        drop(one);
        drop(held);
        let counts = places.counts.lock().unwrap();
        assert_eq!(counts.total, 0);
        assert!(counts.per_client.is_empty());
    }
}
