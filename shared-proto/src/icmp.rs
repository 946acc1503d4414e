//! `icmp` monitors: the settings of an echo check (how many echoes, how far apart, how much
//! loss is still up) and what the agent reports of one in `meta.icmp`. The sockets are the
//! agent's (`poller-agent/src/checks/icmp.rs`).

use serde::{Deserialize, Serialize};

use crate::ValidationError;

pub const MAX_ECHOES: u32 = 10;
/// The fastest spacing `ping` allows a user (iputils' rule, kept here so that a check never
/// floods its target).
pub const MIN_ECHO_INTERVAL_MS: u64 = 200;
pub const MAX_ECHO_INTERVAL_MS: u64 = 10_000;

fn default_count() -> u32 {
    3
}
fn default_echo_interval() -> u64 {
    1_000
}
fn default_max_loss() -> u32 {
    50
}

/// Settings of an `icmp` check: `count` echo requests `echo_interval_ms` apart, each waiting
/// up to the monitor's `timeout_ms` for its reply; down when more than `max_loss_percent` of
/// them go unanswered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IcmpSettings {
    /// Echo requests per check.
    #[serde(default = "default_count")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10, default = 3))]
    pub count: u32,
    /// Time between two echo requests of a check.
    #[serde(default = "default_echo_interval")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 200, maximum = 10000, default = 1000)
    )]
    pub echo_interval_ms: u64,
    /// Down when more than this share of the echoes is lost (0: any loss is down).
    #[serde(default = "default_max_loss")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 99, default = 50))]
    pub max_loss_percent: u32,
}

impl Default for IcmpSettings {
    fn default() -> Self {
        Self {
            count: default_count(),
            echo_interval_ms: default_echo_interval(),
            max_loss_percent: default_max_loss(),
        }
    }
}

impl IcmpSettings {
    pub fn validate(&self) -> Result<(), ValidationError> {
        let out = |field: &str, min: u64, max: u64, got: u64| {
            Err(ValidationError::new(
                format!("settings.{field}"),
                format!("must be between {min} and {max}, got {got}"),
            ))
        };
        if !(1..=MAX_ECHOES).contains(&self.count) {
            return out("count", 1, MAX_ECHOES.into(), self.count.into());
        }
        if !(MIN_ECHO_INTERVAL_MS..=MAX_ECHO_INTERVAL_MS).contains(&self.echo_interval_ms) {
            return out(
                "echo_interval_ms",
                MIN_ECHO_INTERVAL_MS,
                MAX_ECHO_INTERVAL_MS,
                self.echo_interval_ms,
            );
        }
        if self.max_loss_percent > 99 {
            return out("max_loss_percent", 0, 99, self.max_loss_percent.into());
        }
        Ok(())
    }

    /// The longest one check can take: the echoes' spacing and the last one's wait.
    pub fn longest_check_ms(&self, timeout_ms: u64) -> u64 {
        u64::from(self.count.saturating_sub(1)) * self.echo_interval_ms + timeout_ms
    }

    /// Whether `lost` of `sent` echoes is more loss than allowed.
    pub fn too_lossy(&self, lost: u32, sent: u32) -> bool {
        // Integers: 100·lost > max·sent, so that 1 of 2 at 50 % is not over.
        u64::from(lost) * 100 > u64::from(self.max_loss_percent) * u64::from(sent)
    }
}

/// Round-trip times of the echoes answered, in milliseconds (as `ping` prints them).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RttSummary {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    /// The standard deviation, as iputils' `ping` computes its `mdev`.
    pub mdev: f64,
}

impl RttSummary {
    /// `None` when no echo was answered.
    pub fn of(rtts_ms: &[f64]) -> Option<RttSummary> {
        if rtts_ms.is_empty() {
            return None;
        }
        let n = rtts_ms.len() as f64;
        let avg = rtts_ms.iter().sum::<f64>() / n;
        Some(RttSummary {
            min: rtts_ms.iter().copied().fold(f64::INFINITY, f64::min),
            avg,
            max: rtts_ms.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mdev: (rtts_ms.iter().map(|r| r * r).sum::<f64>() / n - avg * avg)
                .max(0.0)
                .sqrt(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_over_the_threshold_is_down() {
        let half = IcmpSettings::default();
        assert!(!half.too_lossy(1, 2), "50 % is not over 50 %");
        assert!(half.too_lossy(2, 3));
        assert!(!half.too_lossy(1, 3));
        let strict = IcmpSettings {
            max_loss_percent: 0,
            ..IcmpSettings::default()
        };
        assert!(strict.too_lossy(1, 10) && !strict.too_lossy(0, 10));
    }

    #[test]
    fn rtt_summary_as_ping_prints_it() {
        let s = RttSummary::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.min, s.avg, s.max), (1.0, 2.0, 3.0));
        // ping's mdev: sqrt(mean(x²) − mean(x)²) = sqrt(14/3 − 4).
        assert!((s.mdev - (2.0f64 / 3.0).sqrt()).abs() < 1e-9);
        assert!(RttSummary::of(&[]).is_none());
    }

    #[test]
    fn a_check_lasts_its_echoes_and_the_last_wait() {
        assert_eq!(IcmpSettings::default().longest_check_ms(2_000), 4_000);
        let refused = IcmpSettings {
            echo_interval_ms: 50,
            ..IcmpSettings::default()
        };
        assert_eq!(
            refused.validate().unwrap_err().field,
            "settings.echo_interval_ms"
        );
    }
}
