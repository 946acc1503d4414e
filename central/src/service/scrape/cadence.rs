//! A scraper's rhythm, learnt from when its scrapes arrive, so that `/metrics`' state can be
//! rendered just before the next one instead of while it waits. Prometheus scrapes each target
//! at a fixed interval, so once two intervals in a row agree, the next scrape is expected one
//! interval after the last. A guess decides only *when* a text is rendered, never what it holds
//! or how old a scrape may find it (`RENDER_EVERY` still bounds that); a wrong guess (two
//! scrapers whose intervals agree by chance) costs a rendering for nobody. Owns the guess
//! only; time is handed in.

use std::time::Duration;

use tokio::time::Instant;

/// The longest interval learnt: a scraper slower than this gets its text rendered on demand
/// (a text rendered ahead for nobody costs a rendering; at a scrape every five minutes the
/// wait matters less than that cost).
pub const LONGEST_PERIOD: Duration = Duration::from_secs(300);

/// The arrivals seen so far.
#[derive(Debug, Default)]
pub struct Cadence {
    last: Option<Instant>,
    period: Option<Duration>,
}

impl Cadence {
    /// Notes a scrape that arrived `at`; returns when the next one is expected, if the last
    /// two intervals agree (within a tenth: Prometheus keeps its interval to the millisecond,
    /// and network delays are small against it) and are at most `LONGEST_PERIOD`.
    pub fn scraped(&mut self, at: Instant) -> Option<Instant> {
        let period = self.last.map(|last| at.saturating_duration_since(last));
        let agreed = match (self.period, period) {
            (Some(before), Some(now)) if agree(before, now) => Some(now),
            _ => None,
        };
        self.last = Some(at);
        self.period = period;
        agreed
            .filter(|p| !p.is_zero() && *p <= LONGEST_PERIOD)
            .map(|p| at + p)
    }
}

fn agree(a: Duration, b: Duration) -> bool {
    let (low, high) = if a < b { (a, b) } else { (b, a) };
    high - low <= high / 10
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    #[test]
    fn a_steady_scraper_is_expected_one_interval_after_its_last_scrape() {
        let (start, mut cadence) = (Instant::now(), Cadence::default());
        assert_eq!(
            cadence.scraped(at(start, 0)),
            None,
            "one scrape says nothing"
        );
        assert_eq!(
            cadence.scraped(at(start, 15_000)),
            None,
            "one interval neither"
        );
        assert_eq!(
            cadence.scraped(at(start, 30_050)),
            Some(at(start, 45_100)),
            "two intervals that agree within a tenth"
        );
        assert_eq!(cadence.scraped(at(start, 45_000)), Some(at(start, 59_950)));
    }

    #[test]
    fn irregular_arrivals_are_not_guessed_at() {
        let (start, mut cadence) = (Instant::now(), Cadence::default());
        let guesses: Vec<_> = [0, 15_000, 17_000, 32_000, 60_000]
            .into_iter()
            .map(|ms| cadence.scraped(at(start, ms)))
            .collect();
        assert_eq!(guesses, vec![None; 5]);
    }

    #[test]
    fn a_scraper_slower_than_the_longest_period_or_two_at_once_are_not_guessed_at() {
        let (start, mut cadence) = (Instant::now(), Cadence::default());
        let slow = LONGEST_PERIOD.as_millis() as u64 + 1_000;
        for i in 0..4 {
            assert_eq!(cadence.scraped(at(start, i * slow)), None);
        }
        let mut cadence = Cadence::default();
        for _ in 0..3 {
            assert_eq!(
                cadence.scraped(start),
                None,
                "the same instant is no interval"
            );
        }
    }
}
