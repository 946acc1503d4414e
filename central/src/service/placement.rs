//! Which poller runs a monitor: a pure function of the monitor and the pollers.
//!
//! Among eligible pollers the choice is rendezvous hashing (highest score of `hash(monitor,
//! poller)` wins), so a poller joining or leaving moves only the monitors it wins or held, and
//! every central replica reaches the same answer without coordination.

use shared_proto::PollerMode;
use uuid::Uuid;

/// What placement needs to know about a poller.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub id: Uuid,
    pub region: Option<String>,
    pub datacenter: Option<String>,
    pub capabilities: Vec<String>,
    pub enabled: bool,
    pub online: bool,
    /// Online for at least the settle time: trusted to take monitors back.
    pub settled: bool,
}

/// What placement needs to know about a monitor.
#[derive(Debug, Clone)]
pub struct Placement {
    pub monitor_id: Uuid,
    pub kind: String,
    pub mode: PollerMode,
    pub pinned: Option<Uuid>,
    pub region: Option<String>,
    pub datacenter: Option<String>,
    pub capability: Option<String>,
    pub failover: bool,
    pub current: Option<Uuid>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run on this poller (which may be offline, when no failover is possible or wanted).
    Assign(Uuid),
    /// No poller qualifies; the reason is shown in the monitor's status.
    Unplaced(String),
}

pub fn place(monitor: &Placement, pollers: &[Candidate]) -> Decision {
    let eligible: Vec<&Candidate> = pollers
        .iter()
        .filter(|p| p.enabled && matches_mode(monitor, p) && has_capabilities(monitor, p))
        .collect();
    if eligible.is_empty() {
        return Decision::Unplaced(unplaced_reason(monitor, pollers));
    }
    let online: Vec<&Candidate> = eligible.iter().copied().filter(|p| p.online).collect();
    let pool = if !monitor.failover {
        // Without failover a monitor stays where hashing put it, online or not.
        &eligible
    } else if online.is_empty() {
        if let Some(current) = monitor
            .current
            .filter(|c| eligible.iter().any(|p| p.id == *c))
        {
            return Decision::Assign(current);
        }
        &eligible
    } else {
        &online
    };
    // A monitor leaves a healthy current poller only for one that has stayed online for the
    // settle time, so a poller coming back (or flapping) does not drag monitors to and fro.
    let current_online = monitor
        .current
        .filter(|c| pool.iter().any(|p| p.id == *c && p.online));
    let settled_pool: Vec<&Candidate>;
    let pool = match current_online {
        Some(current) => {
            settled_pool = pool
                .iter()
                .copied()
                .filter(|p| p.settled || p.id == current)
                .collect();
            &settled_pool
        }
        None => pool,
    };
    let winner = pool
        .iter()
        .max_by_key(|p| rendezvous_score(monitor.monitor_id, p.id))
        .expect("pool is not empty");
    Decision::Assign(winner.id)
}

fn matches_mode(monitor: &Placement, poller: &Candidate) -> bool {
    match monitor.mode {
        PollerMode::Auto => true,
        PollerMode::Pinned => monitor.pinned == Some(poller.id),
        // A location of a multi-location monitor is placed as a group of its one region.
        PollerMode::Grouped | PollerMode::Multi => {
            let region_ok = monitor.region.is_none() || monitor.region == poller.region;
            let dc_ok = monitor.datacenter.is_none() || monitor.datacenter == poller.datacenter;
            region_ok && dc_ok
        }
    }
}

fn has_capabilities(monitor: &Placement, poller: &Candidate) -> bool {
    let has = |c: &str| poller.capabilities.iter().any(|p| p == c);
    has(&monitor.kind) && monitor.capability.as_deref().is_none_or(has)
}

fn unplaced_reason(monitor: &Placement, pollers: &[Candidate]) -> String {
    let scope: Vec<&Candidate> = pollers
        .iter()
        .filter(|p| matches_mode(monitor, p))
        .collect();
    let wanted = match &monitor.capability {
        Some(extra) => format!("`{}` and `{extra}`", monitor.kind),
        None => format!("`{}`", monitor.kind),
    };
    match monitor.mode {
        _ if pollers.is_empty() => "no poller is registered".into(),
        PollerMode::Pinned if scope.is_empty() => "the pinned poller does not exist".into(),
        PollerMode::Grouped | PollerMode::Multi if scope.is_empty() => format!(
            "no poller in region {} / datacenter {}",
            monitor.region.as_deref().unwrap_or("any"),
            monitor.datacenter.as_deref().unwrap_or("any")
        ),
        _ if scope.iter().all(|p| !p.enabled) => "every matching poller is disabled".into(),
        _ => format!("no matching poller has the capability {wanted}"),
    }
}

/// A stable 64-bit mix of the two ids (FNV-1a, then a SplitMix64 finaliser so that ids that
/// differ in one byte still spread over the whole range).
fn rendezvous_score(monitor: Uuid, poller: Uuid) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in monitor.as_bytes().iter().chain(poller.as_bytes()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poller(region: &str, online: bool) -> Candidate {
        Candidate {
            id: Uuid::new_v4(),
            region: Some(region.into()),
            datacenter: None,
            capabilities: vec!["http".into(), "tcp".into()],
            enabled: true,
            online,
            settled: online,
        }
    }

    fn monitor(mode: PollerMode) -> Placement {
        Placement {
            monitor_id: Uuid::new_v4(),
            kind: "http".into(),
            mode,
            pinned: None,
            region: None,
            datacenter: None,
            capability: None,
            failover: mode != PollerMode::Pinned,
            current: None,
        }
    }

    #[test]
    fn pinned_goes_to_its_poller_even_offline() {
        let pollers = vec![poller("eu", true), poller("us", false)];
        let mut m = monitor(PollerMode::Pinned);
        m.pinned = Some(pollers[1].id);
        assert_eq!(place(&m, &pollers), Decision::Assign(pollers[1].id));
        m.pinned = Some(Uuid::new_v4());
        assert_eq!(
            place(&m, &pollers),
            Decision::Unplaced("the pinned poller does not exist".into())
        );
    }

    #[test]
    fn auto_prefers_online_pollers_and_fails_over() {
        let mut pollers = vec![poller("eu", true), poller("us", true)];
        let m = monitor(PollerMode::Auto);
        let Decision::Assign(first) = place(&m, &pollers) else {
            panic!()
        };
        pollers.iter_mut().find(|p| p.id == first).unwrap().online = false;
        let Decision::Assign(second) = place(&m, &pollers) else {
            panic!()
        };
        assert_ne!(first, second, "an offline poller's monitor moves");
    }

    #[test]
    fn grouped_stays_in_its_region() {
        let pollers = vec![poller("eu", true), poller("us", true), poller("us", true)];
        let mut m = monitor(PollerMode::Grouped);
        m.region = Some("eu".into());
        for _ in 0..20 {
            m.monitor_id = Uuid::new_v4();
            assert_eq!(place(&m, &pollers), Decision::Assign(pollers[0].id));
        }
        m.region = Some("ap".into());
        assert!(matches!(place(&m, &pollers), Decision::Unplaced(r) if r.contains("region ap")));
    }

    #[test]
    fn capability_mismatch_is_explained() {
        let pollers = vec![poller("eu", true)];
        let mut m = monitor(PollerMode::Auto);
        m.kind = "dns".into();
        assert_eq!(
            place(&m, &pollers),
            Decision::Unplaced("no matching poller has the capability `dns`".into())
        );
        assert_eq!(
            place(&m, &[]),
            Decision::Unplaced("no poller is registered".into())
        );
    }

    #[test]
    fn disabled_pollers_get_nothing() {
        let mut pollers = vec![poller("eu", true)];
        pollers[0].enabled = false;
        let m = monitor(PollerMode::Auto);
        assert_eq!(
            place(&m, &pollers),
            Decision::Unplaced("every matching poller is disabled".into())
        );
    }

    #[test]
    fn a_new_poller_takes_only_its_share() {
        let mut pollers: Vec<Candidate> = (0..4).map(|_| poller("eu", true)).collect();
        let monitors: Vec<Placement> = (0..1000).map(|_| monitor(PollerMode::Auto)).collect();
        let before: Vec<Decision> = monitors.iter().map(|m| place(m, &pollers)).collect();
        pollers.push(poller("eu", true));
        let newcomer = pollers[4].id;
        let mut moved = 0;
        for (m, old) in monitors.iter().zip(&before) {
            let new = place(m, &pollers);
            if &new != old {
                assert_eq!(
                    new,
                    Decision::Assign(newcomer),
                    "monitors move only to the newcomer"
                );
                moved += 1;
            }
        }
        assert!(
            (120..=280).contains(&moved),
            "about a fifth moves, got {moved}"
        );
    }

    #[test]
    fn monitors_return_only_once_the_poller_has_settled() {
        let mut pollers = vec![poller("eu", true), poller("eu", true)];
        let monitors: Vec<Placement> = (0..50).map(|_| monitor(PollerMode::Auto)).collect();
        let home: Vec<Decision> = monitors.iter().map(|m| place(m, &pollers)).collect();
        let first = pollers[0].id;
        assert!(
            home.contains(&Decision::Assign(first)),
            "some monitors live on the first poller"
        );
        // The first poller goes away: everything fails over to the second.
        pollers[0].online = false;
        pollers[0].settled = false;
        let moved: Vec<Placement> = monitors
            .iter()
            .map(|m| {
                let Decision::Assign(to) = place(m, &pollers) else {
                    panic!()
                };
                assert_eq!(to, pollers[1].id);
                Placement {
                    current: Some(to),
                    ..m.clone()
                }
            })
            .collect();
        // Back online but not settled: nothing moves yet.
        pollers[0].online = true;
        assert!(moved
            .iter()
            .all(|m| place(m, &pollers) == Decision::Assign(pollers[1].id)));
        // Settled: each monitor returns to where hashing puts it.
        pollers[0].settled = true;
        let back: Vec<Decision> = moved.iter().map(|m| place(m, &pollers)).collect();
        assert_eq!(back, home);
    }
}
