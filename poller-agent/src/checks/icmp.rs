//! `icmp`: echo requests to the target (IPv4 or IPv6) through the `surge-ping` crate; down
//! when more of them go unanswered than `max_loss_percent` allows. `meta.icmp` carries what
//! `ping` prints: sent, received, loss and round-trip min/avg/max/mdev.
//!
//! Sockets: unprivileged ICMP sockets (`SOCK_DGRAM`, allowed to the groups in
//! `net.ipv4.ping_group_range`) when the system allows them, raw sockets (`CAP_NET_RAW`)
//! otherwise; `POLLER_ICMP_SOCKET` can insist on one. `IcmpPinger::open` says at start which
//! one the agent has, and the agent advertises the capability `icmp` only when it has one.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use shared_proto::icmp::{IcmpSettings, RttSummary};
use surge_ping::{Client, Config, IcmpPacket, PingIdentifier, PingSequence, ICMP};

use super::CheckOutcome;

/// Which sockets to try (`POLLER_ICMP_SOCKET`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SocketChoice {
    /// Unprivileged if the system allows it, else raw.
    #[default]
    Auto,
    Unprivileged,
    Raw,
    /// No ICMP: the agent does not advertise `icmp`.
    Off,
}

/// The kind of socket the agent got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketKind {
    Unprivileged,
    Raw,
}

impl SocketKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SocketKind::Unprivileged => "unprivileged",
            SocketKind::Raw => "raw",
        }
    }

    fn socket_type(self) -> socket2::Type {
        match self {
            SocketKind::Unprivileged => socket2::Type::DGRAM,
            SocketKind::Raw => socket2::Type::RAW,
        }
    }
}

/// An echo's payload, as `ping` sends by default.
const PAYLOAD: [u8; 56] = [0; 56];

/// Sends echoes: one socket per address family (IPv6 may be missing on a host without it).
pub struct IcmpPinger {
    kind: SocketKind,
    v4: Client,
    v6: Option<Client>,
    /// Every echo of this agent gets its own sequence number: replies are matched by address,
    /// identifier and sequence, and two monitors may ping one host at once.
    sequence: AtomicU16,
}

impl IcmpPinger {
    /// Opens the sockets `choice` allows, in its order; why none could be, otherwise.
    pub fn open(choice: SocketChoice) -> Result<IcmpPinger, String> {
        let kinds: &[SocketKind] = match choice {
            SocketChoice::Auto => &[SocketKind::Unprivileged, SocketKind::Raw],
            SocketChoice::Unprivileged => &[SocketKind::Unprivileged],
            SocketChoice::Raw => &[SocketKind::Raw],
            SocketChoice::Off => return Err("POLLER_ICMP_SOCKET is off".into()),
        };
        let mut why = Vec::new();
        for &kind in kinds {
            match socket(kind, ICMP::V4) {
                Ok(v4) => {
                    return Ok(IcmpPinger {
                        kind,
                        v4,
                        v6: socket(kind, ICMP::V6).ok(),
                        sequence: AtomicU16::new(rand::random()),
                    })
                }
                Err(e) => why.push(format!("{} sockets: {e}", kind.as_str())),
            }
        }
        Err(why.join("; "))
    }

    pub fn kind(&self) -> SocketKind {
        self.kind
    }

    pub fn has_ipv6(&self) -> bool {
        self.v6.is_some()
    }

    pub async fn check(
        &self,
        target: &str,
        settings: &IcmpSettings,
        timeout: Duration,
    ) -> CheckOutcome {
        let started = Instant::now();
        let address = match resolve(target, timeout, self.v6.is_some()).await {
            Ok(address) => address,
            Err(outcome) => return *outcome,
        };
        let client = match (address, &self.v6) {
            (IpAddr::V4(_), _) => &self.v4,
            (IpAddr::V6(_), Some(v6)) => v6,
            (IpAddr::V6(_), None) => {
                return CheckOutcome::permanent(
                    None,
                    format!("{address} is IPv6 and this agent cannot open an ICMPv6 socket"),
                    json!({}),
                )
            }
        };
        // Echo `i` leaves at `i × echo_interval_ms` and waits `timeout` for its reply, whatever
        // the others do, so a check lasts `(count − 1) × echo_interval_ms + timeout` at most
        // (what central allows within the interval and the engine's limit assumes).
        let mut echoes = tokio::task::JoinSet::new();
        for echo in 0..settings.count {
            let client = client.clone();
            let sequence = PingSequence(self.sequence.fetch_add(1, Ordering::Relaxed));
            let leaves = Duration::from_millis(settings.echo_interval_ms * u64::from(echo));
            echoes.spawn(async move {
                tokio::time::sleep(leaves).await;
                let mut pinger = client.pinger(address, PingIdentifier(rand::random())).await;
                pinger.timeout(timeout);
                pinger.ping(sequence, &PAYLOAD).await
            });
        }
        let mut rtts = Vec::with_capacity(settings.count as usize);
        let mut errors = Vec::new();
        while let Some(answer) = echoes.join_next().await {
            match answer {
                Ok(Ok((packet, rtt))) if is_echo_reply(&packet) => {
                    rtts.push(rtt.as_secs_f64() * 1_000.0)
                }
                // An ICMP error about the echo (unreachable, time exceeded): lost, and why.
                // Raw sockets only: the kernel does not pass these to unprivileged ones.
                Ok(Ok((packet, _))) => errors.push(icmp_error(&packet)),
                Ok(Err(surge_ping::SurgeError::Timeout { .. })) => {}
                Ok(Err(e)) => errors.push(e.to_string()),
                Err(e) => errors.push(format!("echo task failed: {e}")),
            }
        }
        outcome(
            address,
            settings,
            &rtts,
            errors.first().map(String::as_str),
            self.kind,
            started.elapsed(),
        )
    }
}

fn socket(kind: SocketKind, family: ICMP) -> Result<Client, String> {
    let config = Config::builder()
        .kind(family)
        .sock_type_hint(kind.socket_type())
        .build();
    let client = Client::new(&config).map_err(|e| first_line(&e.to_string()))?;
    // `surge-ping` tries the other kind when the one asked for fails: only the one asked for
    // counts, so that the kind the agent reports is the kind it uses.
    if client.get_socket().get_type() != kind.socket_type() {
        return Err("not allowed".into());
    }
    Ok(client)
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}

fn is_echo_reply(packet: &IcmpPacket) -> bool {
    match packet {
        IcmpPacket::V4(p) => p.get_icmp_type().0 == 0,
        IcmpPacket::V6(p) => p.get_icmpv6_type().0 == 129,
    }
}

fn icmp_error(packet: &IcmpPacket) -> String {
    match packet {
        IcmpPacket::V4(p) => format!(
            "ICMP type {} code {} from {}",
            p.get_icmp_type().0,
            p.get_icmp_code().0,
            p.get_source()
        ),
        IcmpPacket::V6(p) => format!(
            "ICMPv6 type {} code {} from {}",
            p.get_icmpv6_type().0,
            p.get_icmpv6_code().0,
            p.get_source()
        ),
    }
}

/// The target's address: itself, or the first its name resolves to within the timeout, of a
/// family the agent can ping (`v6`: whether it has an ICMPv6 socket).
async fn resolve(target: &str, timeout: Duration, v6: bool) -> Result<IpAddr, Box<CheckOutcome>> {
    let bare = target.trim_start_matches('[').trim_end_matches(']');
    if let Ok(address) = bare.parse::<IpAddr>() {
        // `::ffff:192.0.2.1` is an IPv4 host.
        return Ok(address.to_canonical());
    }
    match tokio::time::timeout(timeout, tokio::net::lookup_host((bare, 0))).await {
        Ok(Ok(addresses)) => {
            let addresses: Vec<IpAddr> = addresses.map(|a| a.ip().to_canonical()).collect();
            addresses
                .iter()
                .find(|a| a.is_ipv4() || v6)
                .or(addresses.first())
                .copied()
                .ok_or_else(|| {
                    Box::new(CheckOutcome::permanent(
                        None,
                        "dns: name has no address",
                        json!({}),
                    ))
                })
        }
        Ok(Err(_)) => Err(Box::new(CheckOutcome::permanent(
            None,
            "dns: name does not resolve",
            json!({}),
        ))),
        Err(_) => Err(Box::new(CheckOutcome::down(
            None,
            format!("dns: no answer within {} ms", timeout.as_millis()),
            json!({}),
        ))),
    }
}

/// The outcome of `rtts.len()` answered echoes of `settings.count`.
fn outcome(
    address: IpAddr,
    settings: &IcmpSettings,
    rtts: &[f64],
    error: Option<&str>,
    socket: SocketKind,
    took: Duration,
) -> CheckOutcome {
    let sent = settings.count;
    let received = rtts.len() as u32;
    let lost = sent - received;
    let loss_percent = f64::from(lost) * 100.0 / f64::from(sent);
    let rtt = RttSummary::of(rtts);
    let meta = json!({"icmp": {
        "address": address.to_string(),
        "sent": sent,
        "received": received,
        "loss_percent": loss_percent,
        "rtt_ms": rtt,
        "socket": socket.as_str(),
    }});
    let rtt_text = rtt.map(|r| {
        format!(
            "; rtt min/avg/max/mdev = {:.3}/{:.3}/{:.3}/{:.3} ms",
            r.min, r.avg, r.max, r.mdev
        )
    });
    if settings.too_lossy(lost, sent) {
        let why = error.map(|e| format!(" ({e})")).unwrap_or_default();
        return CheckOutcome::down(
            Some(took),
            format!(
                "{lost} of {sent} echoes to {address} unanswered{why}: {loss_percent:.0}% loss, \
                 over {}%{}",
                settings.max_loss_percent,
                rtt_text.unwrap_or_default()
            ),
            meta,
        );
    }
    let average = rtt.map_or(Duration::ZERO, |r| Duration::from_secs_f64(r.avg / 1_000.0));
    CheckOutcome::up(average, meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_proto::poller_api::ResultStatus;

    #[test]
    fn loss_over_the_threshold_is_down_with_what_ping_prints() {
        let settings = IcmpSettings::default();
        let address: IpAddr = "192.0.2.1".parse().unwrap();
        let took = Duration::from_secs(3);
        let up = outcome(address, &settings, &[1.0, 3.0], None, SocketKind::Raw, took);
        assert_eq!(up.status, ResultStatus::Up);
        assert_eq!(up.latency_ms, Some(2));
        assert_eq!(up.meta["icmp"]["received"], 2);
        assert_eq!(up.meta["icmp"]["rtt_ms"]["max"], 3.0);
        let down = outcome(address, &settings, &[2.0], None, SocketKind::Raw, took);
        assert_eq!(down.status, ResultStatus::Down);
        assert_eq!(
            down.msg,
            "2 of 3 echoes to 192.0.2.1 unanswered: 67% loss, over 50%; \
             rtt min/avg/max/mdev = 2.000/2.000/2.000/0.000 ms"
        );
        let silent = outcome(
            address,
            &settings,
            &[],
            Some("x"),
            SocketKind::Unprivileged,
            took,
        );
        assert!(silent
            .msg
            .starts_with("3 of 3 echoes to 192.0.2.1 unanswered (x): 100% loss"));
        assert!(silent.meta["icmp"]["rtt_ms"].is_null());
        assert_eq!(silent.meta["icmp"]["socket"], "unprivileged");
    }
}
