//! A multi-location monitor's status from its locations' statuses: `down` when at least the
//! quorum sees it down, `degraded` when fewer do, and locations nobody can hear from count
//! neither way. A pure function; loading the locations is `statuses`' job.

use shared_proto::settings_api::{LocationStatus, MonitorStatus};

/// How many locations must see a monitor down: its set quorum, else a majority of them.
pub fn effective(stored: Option<i64>, locations: usize) -> u32 {
    stored.map_or(locations as u32 / 2 + 1, |q| {
        q.clamp(1, i64::from(u32::MAX)) as u32
    })
}

pub fn combine(locations: &[LocationStatus], quorum: u32) -> (MonitorStatus, Option<String>) {
    let count = |wanted: LocationStatus| locations.iter().filter(|s| **s == wanted).count();
    let (down, up, unknown) = (
        count(LocationStatus::Down),
        count(LocationStatus::Up),
        count(LocationStatus::Unknown),
    );
    let total = locations.len();
    let quorum = quorum.max(1) as usize;
    let unknown_note = match unknown {
        0 => String::new(),
        1 => "; 1 location unknown".to_string(),
        n => format!("; {n} locations unknown"),
    };
    if down >= quorum {
        (
            MonitorStatus::Down,
            Some(format!(
                "{down} of {total} locations see it down (quorum {quorum}){unknown_note}"
            )),
        )
    } else if down > 0 {
        (
            MonitorStatus::Degraded,
            Some(format!(
                "{down} of {total} locations see it down; {quorum} needed for down{unknown_note}"
            )),
        )
    } else if up > 0 {
        let reason =
            (unknown > 0).then(|| format!("{up} of {total} locations see it up{unknown_note}"));
        (MonitorStatus::Up, reason)
    } else if count(LocationStatus::Pending) > 0 {
        (
            MonitorStatus::Pending,
            Some("no location has a result yet".into()),
        )
    } else {
        (
            MonitorStatus::Stale,
            Some("no location can check it now (see locations)".into()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use LocationStatus::*;

    #[test]
    fn one_location_down_of_three_is_degraded_two_are_down() {
        assert_eq!(combine(&[Down, Up, Up], 2).0, MonitorStatus::Degraded);
        assert_eq!(combine(&[Down, Down, Up], 2).0, MonitorStatus::Down);
        assert_eq!(combine(&[Up, Up, Up], 2), (MonitorStatus::Up, None));
        let (status, reason) = combine(&[Up, Unknown, Up], 2);
        assert_eq!(status, MonitorStatus::Up);
        assert_eq!(
            reason.unwrap(),
            "2 of 3 locations see it up; 1 location unknown"
        );
        assert_eq!(combine(&[Pending, Pending], 1).0, MonitorStatus::Pending);
        assert_eq!(combine(&[Unknown, Unknown], 1).0, MonitorStatus::Stale);
    }

    fn location() -> impl Strategy<Value = LocationStatus> {
        prop_oneof![Just(Pending), Just(Up), Just(Down), Just(Unknown)]
    }

    proptest! {
        /// `down` exactly when the quorum of locations sees it down; any fewer downs degrade.
        #[test]
        fn down_exactly_at_quorum(locations in proptest::collection::vec(location(), 2..8), quorum in 1u32..8) {
            let downs = locations.iter().filter(|s| **s == Down).count();
            let (status, _) = combine(&locations, quorum);
            prop_assert_eq!(status == MonitorStatus::Down, downs >= quorum as usize);
            prop_assert_eq!(status == MonitorStatus::Degraded, downs > 0 && downs < quorum as usize);
        }

        /// A location nobody hears from never pushes the monitor towards `down`.
        #[test]
        fn unknown_is_never_down(mut locations in proptest::collection::vec(location(), 2..8), quorum in 1u32..8, at: prop::sample::Index) {
            let i = at.index(locations.len());
            locations[i] = Unknown;
            let with_unknown = combine(&locations, quorum).0;
            locations[i] = Up;
            let with_up = combine(&locations, quorum).0;
            prop_assert_eq!(with_unknown == MonitorStatus::Down, with_up == MonitorStatus::Down);
            prop_assert_eq!(with_unknown == MonitorStatus::Degraded, with_up == MonitorStatus::Degraded);
        }
    }
}
