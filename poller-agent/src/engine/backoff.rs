//! Exponential backoff with jitter: `min(base × 2^attempt, max)`, then ±20 %, never past
//! `max` (by default the monitor's interval: a failing target is never checked later than
//! that, `settings::CommonSettings::backoff_max_ms_for`).

use std::time::Duration;

use rand::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            max: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The delay before jitter.
    pub fn nominal(&self, attempt: u32) -> Duration {
        let factor = 2u32.checked_pow(attempt).unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// The delay with ±20 % jitter, so that monitors failing together do not retry together;
    /// never past `max`, the longest the monitor allows.
    pub fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        self.nominal(attempt)
            .mul_f64(rng.gen_range(0.8..=1.2))
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn doubles_from_one_second_up_to_the_cap() {
        let backoff = Backoff::default();
        let seconds: Vec<u64> = (0..12).map(|a| backoff.nominal(a).as_secs()).collect();
        assert_eq!(seconds, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(
            backoff.nominal(u32::MAX),
            Duration::from_secs(300),
            "no overflow"
        );
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let backoff = Backoff::default();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let (mut low, mut high) = (f64::MAX, 0f64);
        for attempt in 0..12 {
            let nominal = backoff.nominal(attempt).as_secs_f64();
            for _ in 0..500 {
                let delay = backoff.delay(attempt, &mut rng);
                assert!(delay <= backoff.max, "never past the cap: {delay:?}");
                let ratio = delay.as_secs_f64() / nominal;
                assert!((0.8..=1.2).contains(&ratio), "{ratio}");
                low = low.min(ratio);
                high = high.max(ratio);
            }
        }
        assert!(
            low < 0.82 && high > 1.18,
            "jitter uses the whole band: {low}..{high}"
        );
    }
}
