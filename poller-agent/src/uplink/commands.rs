//! Operators' commands on their way in and out: which command ids this agent has already
//! taken (central offers one again until it hears back, so a repeat must not run it again),
//! and sending what came of each back to central, again when central offers a command once
//! more (the acknowledgement may have been lost). It does not carry commands out (the engine
//! runner does).

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use shared_proto::poller_api::CommandAck;
use tokio::sync::{mpsc, watch};
use uuid::Uuid;

use super::{CentralClient, UplinkError};
use crate::engine::runner::Acknowledgement;

/// Ids remembered; central offers a command for at most a few minutes, far fewer than this
/// many arrive in that time.
const REMEMBERED: usize = 4_096;
/// Attempts to deliver one acknowledgement. Central stops waiting for a command after a few
/// minutes, so trying longer would tell nobody.
const ATTEMPTS: u32 = 5;
/// Acknowledgements kept to send again when central offers their command once more.
const KEPT: usize = 256;

/// The command ids already taken, oldest forgotten first.
#[derive(Debug, Default)]
pub struct Taken {
    order: VecDeque<Uuid>,
    ids: HashSet<Uuid>,
}

impl Taken {
    /// `true` the first time `id` is offered.
    pub fn first_time(&mut self, id: Uuid) -> bool {
        if !self.ids.insert(id) {
            return false;
        }
        self.order.push_back(id);
        if self.order.len() > REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
        true
    }
}

/// Sends acknowledgements as they come, each in a task of its own (one slow delivery does
/// not hold the others back) and retried a few times; keeps the newest to send again.
pub struct Acknowledgements {
    pub client: Arc<CentralClient>,
}

impl Acknowledgements {
    pub async fn run(
        self,
        mut acks: mpsc::Receiver<Acknowledgement>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut kept: VecDeque<(Uuid, CommandAck)> = VecDeque::new();
        loop {
            let next = tokio::select! {
                next = acks.recv() => match next {
                    Some(next) => next,
                    None => return,
                },
                _ = shutdown.changed() => return,
            };
            let (command, ack) = match next {
                Acknowledgement::Done(command, ack) => {
                    kept.push_back((command, ack.clone()));
                    if kept.len() > KEPT {
                        kept.pop_front();
                    }
                    (command, ack)
                }
                // Still running (not kept yet), or long gone: nothing to send.
                Acknowledgement::Again(command) => match kept.iter().find(|(c, _)| *c == command) {
                    Some(found) => found.clone(),
                    None => continue,
                },
            };
            tokio::spawn(deliver(self.client.clone(), command, ack, shutdown.clone()));
        }
    }
}

async fn deliver(
    client: Arc<CentralClient>,
    command: Uuid,
    ack: CommandAck,
    mut shutdown: watch::Receiver<bool>,
) {
    for attempt in 1..=ATTEMPTS {
        match client.acknowledge(command, &ack).await {
            Ok(answer) => {
                tracing::info!(command_id = %command, done = ack.done, already = answer.already,
                    "command acknowledged");
                return;
            }
            Err(e) if e.is_transient() && attempt < ATTEMPTS => {
                tracing::warn!(command_id = %command, "acknowledging failed: {e}; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1 << attempt)) => {}
                    _ = shutdown.changed() => return,
                }
            }
            // Unknown to central (expired, or another poller's): nobody waits for it.
            Err(UplinkError::Refused { status: 404, .. }) => return,
            Err(e) => {
                tracing::warn!(command_id = %command, "could not acknowledge: {e}");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_taken_once_and_the_oldest_are_forgotten() {
        let mut taken = Taken::default();
        let first = Uuid::now_v7();
        assert!(taken.first_time(first));
        assert!(!taken.first_time(first), "a repeat does nothing");
        for _ in 0..REMEMBERED {
            taken.first_time(Uuid::now_v7());
        }
        assert_eq!(taken.ids.len(), REMEMBERED);
        assert!(
            taken.first_time(first),
            "forgotten after REMEMBERED newer ones"
        );
    }
}
