//! What makes two monitors' requests identical (so they can share one in flight), the host a
//! check loads (for the per-host limit), and the phase identical requests share.

use std::hash::{Hash, Hasher};

use shared_proto::monitor::split_host_port;
use shared_proto::settings::{CheckSettings, MonitorSettings};
use shared_proto::{AssignedMonitor, CheckKind};

/// Canonical description of the request a monitor makes: kind, target, timeout and the
/// kind-specific settings (method, headers, body, assertions). Protection settings (breaker,
/// backoff, …) are not part of it: monitors differing only there still share a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestKey(String);

impl RequestKey {
    pub fn of(monitor: &AssignedMonitor) -> RequestKey {
        // The parsed settings, with defaults filled in, so that `{}` and `{"method": "GET"}`
        // are the same request.
        let specific = match MonitorSettings::parse(monitor.kind, &monitor.settings) {
            Ok(parsed) => match parsed.check {
                CheckSettings::Http(s) => serde_json::to_string(&s),
                CheckSettings::Tcp(s) => serde_json::to_string(&s),
                CheckSettings::Dns(s) => serde_json::to_string(&s),
                CheckSettings::Tls(s) => serde_json::to_string(&s),
                CheckSettings::Icmp(s) => serde_json::to_string(&s),
                CheckSettings::Heartbeat(s) => serde_json::to_string(&s),
            }
            .unwrap_or_default(),
            // Unparseable settings: never shared (the monitor id keeps it apart).
            Err(_) => format!("invalid:{}", monitor.id),
        };
        RequestKey(format!(
            "{}|{}|{}|{specific}",
            monitor.kind, monitor.target, monitor.timeout_ms
        ))
    }

    /// A stable hash (FNV-1a), the same in every process, for phases.
    pub fn stable_hash(&self) -> u64 {
        let mut hasher = Fnv1a::default();
        self.0.hash(&mut hasher);
        hasher.finish()
    }
}

#[derive(Debug)]
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        // A final mix so that keys differing in their last bytes spread over the whole range.
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^ (x >> 33)
    }
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// The host name a check connects to, lower-cased.
pub fn host_of(monitor: &AssignedMonitor) -> String {
    let host = match monitor.kind {
        CheckKind::Http => url::Url::parse(&monitor.target)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string)),
        CheckKind::Tcp | CheckKind::Tls => {
            split_host_port(&monitor.target).map(|(h, _)| h.to_string())
        }
        CheckKind::Dns | CheckKind::Icmp => Some(
            monitor
                .target
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
        ),
        CheckKind::Heartbeat => None,
    };
    host.unwrap_or_else(|| monitor.target.clone())
        .to_ascii_lowercase()
}

/// Where a monitor connects, `host:port` (an `http` URL's port or its scheme's), for the kinds
/// whose check connects to one address (`unreachable`); `None` for the others.
pub fn address_of(monitor: &AssignedMonitor) -> Option<String> {
    let address = match monitor.kind {
        CheckKind::Http => {
            let url = url::Url::parse(&monitor.target).ok()?;
            format!("{}:{}", url.host_str()?, url.port_or_known_default()?)
        }
        CheckKind::Tcp => monitor.target.clone(),
        // A `tls` target may leave out its port: 443, as an `https` URL's.
        CheckKind::Tls => match split_host_port(&monitor.target)? {
            (host, Some(port)) => format!("{host}:{port}"),
            (host, None) => format!("{host}:443"),
        },
        CheckKind::Dns | CheckKind::Icmp | CheckKind::Heartbeat => return None,
    };
    Some(address.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use uuid::Uuid;

    fn monitor(target: &str, settings: serde_json::Value) -> AssignedMonitor {
        AssignedMonitor {
            id: Uuid::new_v4(),
            name: "m".into(),
            kind: CheckKind::Http,
            target: target.into(),
            interval_ms: 5000,
            timeout_ms: 1000,
            settings: settings.as_object().unwrap().clone(),
            revision: 1,
            phase_ms: None,
        }
    }

    #[test]
    fn identical_requests_share_a_key_whatever_their_protection_settings() {
        let a = monitor(
            "http://x.test/a",
            json!({"method": "GET", "breaker_threshold": 3}),
        );
        let b = monitor(
            "http://x.test/a",
            json!({"method": "GET", "breaker_threshold": 9}),
        );
        let c = monitor("http://x.test/a", json!({"method": "POST"}));
        assert_eq!(RequestKey::of(&a), RequestKey::of(&b));
        assert_eq!(
            RequestKey::of(&a).stable_hash(),
            RequestKey::of(&b).stable_hash()
        );
        assert_ne!(RequestKey::of(&a), RequestKey::of(&c));
        assert_eq!(host_of(&a), "x.test");
    }
}
