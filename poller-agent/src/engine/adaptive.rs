//! Adaptive interval (opt-in per monitor, `settings.adaptive`): a target that keeps answering
//! the same thing is checked less and less often, up to a maximum; the first change or
//! failure brings it straight back to its configured interval. The maximum never exceeds
//! what central tolerates before it calls a monitor stale (`interval + staleness grace`), so
//! a stretched monitor is never shown as silent. Uptime checks keep their fixed rate by default.

use std::time::Duration;

use rand::Rng;
use shared_proto::monitor::staleness_grace_ms;

/// Each unchanged answer stretches the interval by this factor.
const STRETCH: f64 = 1.5;

#[derive(Debug, Clone)]
pub struct Adaptive {
    base: Duration,
    max: Duration,
    current: Duration,
    last_fingerprint: Option<Option<u64>>,
}

impl Adaptive {
    /// `max_ms` 0 means the longest central tolerates; any larger value is clamped to it.
    pub fn new(interval: Duration, max_ms: u64) -> Self {
        let interval_ms = interval.as_millis() as u64;
        let ceiling = interval_ms.saturating_add(staleness_grace_ms(interval_ms));
        let max_ms = if max_ms == 0 {
            ceiling
        } else {
            max_ms.min(ceiling)
        };
        let max = Duration::from_millis(max_ms).max(interval);
        Self {
            base: interval,
            max,
            current: interval,
            last_fingerprint: None,
        }
    }

    pub fn current(&self) -> Duration {
        self.current
    }

    pub fn max(&self) -> Duration {
        self.max
    }

    /// An `up` answer with this fingerprint (`None` for kinds that give none: then every `up`
    /// is alike). Returns the interval until the next check, with ±10 % jitter once stretched,
    /// always within `[interval, max]`.
    pub fn up(&mut self, fingerprint: Option<u64>, rng: &mut impl Rng) -> Duration {
        let unchanged = self.last_fingerprint == Some(fingerprint);
        self.last_fingerprint = Some(fingerprint);
        self.current = if unchanged {
            self.current.mul_f64(STRETCH).min(self.max)
        } else {
            self.base
        };
        if self.current == self.base {
            return self.base;
        }
        self.current
            .mul_f64(rng.gen_range(0.9..=1.1))
            .clamp(self.base, self.max)
    }

    /// A failure (or an edit): back to the configured interval at once.
    pub fn reset(&mut self) {
        self.current = self.base;
        self.last_fingerprint = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn stretches_while_unchanged_and_snaps_back_on_change_or_failure() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let interval = Duration::from_secs(30);
        let mut adaptive = Adaptive::new(interval, 0);
        assert_eq!(adaptive.max(), Duration::from_secs(90), "30 s + 60 s grace");
        assert_eq!(adaptive.up(Some(7), &mut rng), interval, "first answer");
        let mut previous = interval;
        for _ in 0..10 {
            let next = adaptive.up(Some(7), &mut rng);
            assert!(next >= interval && next <= adaptive.max(), "{next:?}");
            assert!(adaptive.current() >= previous);
            previous = adaptive.current();
        }
        assert_eq!(adaptive.current(), adaptive.max());
        assert_eq!(adaptive.up(Some(8), &mut rng), interval, "changed");
        adaptive.up(Some(8), &mut rng);
        assert!(adaptive.current() > interval);
        adaptive.reset();
        assert_eq!(adaptive.current(), interval);
    }

    #[test]
    fn the_maximum_never_passes_what_central_tolerates() {
        let interval = Duration::from_secs(600);
        assert_eq!(
            Adaptive::new(interval, 3_600_000 * 2).max(),
            Duration::from_secs(1200)
        );
        assert_eq!(
            Adaptive::new(interval, 700_000).max(),
            Duration::from_millis(700_000)
        );
        assert_eq!(
            Adaptive::new(interval, 5_000).max(),
            interval,
            "never below the interval"
        );
    }
}
