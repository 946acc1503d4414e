//! Where argon2 runs: at most one per core at a time, each on one of as many threads kept for
//! it, so that its memory-hard work never stalls the request workers. Each run holds 19 MiB and
//! a core: the bound keeps an unauthenticated flood of registrations or token refreshes to a
//! few dozen MiB and leaves the runtime its cores. A run that cannot start within
//! `HASHING_WAIT` is shed (`503` with `Retry-After`) rather than queued without bound.
//!
//! Two lanes (`Lane`): secrets anyone may present (the admin token, registration secrets) take
//! only the shared runs; one run is kept for hashing new secrets and for the refresh tokens an
//! older central hashed with argon2 (refresh tokens are SHA-256 now: `auth`), so that strangers
//! guessing admin tokens from many addresses cannot stop agents from refreshing their access
//! tokens.
//!
//! Threads of its own, each keeping one run's working memory (`auth::Argon2Memory`) for good:
//! with 19 MiB allocated and freed per run on tokio's blocking pool, the allocator kept what
//! was freed, and a flood of 64 clients grew central by 324 MiB under the same bound on
//! concurrent runs. Now it is one run's memory per thread, allocated at the first run.
//! Owns scheduling and memory only; what is hashed and how is `auth`'s.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use super::auth::{hash_secret, verify_secret, Argon2Memory};
use crate::service::error::{ServiceError, ServiceResult};

const HASHING_WAIT: Duration = Duration::from_secs(5);

/// Runs kept for `Lane::Enrolled`.
const RESERVED_RUNS: usize = 1;

/// Who can cause a run, which decides the runs it may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// A secret anyone may present: the admin token, a registration token's secret.
    Anyone,
    /// Work only an enrolled agent or an operator causes: checking a refresh token an older
    /// central hashed with argon2 (its id is never shown), hashing a secret to store.
    Enrolled,
}

type Job = Box<dyn FnOnce(&mut Argon2Memory) + Send>;

#[derive(Clone)]
pub struct Hashing {
    /// Runs either lane may take.
    shared: Arc<Semaphore>,
    /// Runs only `Lane::Enrolled` may take.
    reserved: Arc<Semaphore>,
    wait: Duration,
    jobs: mpsc::Sender<Job>,
}

impl Hashing {
    pub fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self::with_limits(cores.max(RESERVED_RUNS + 1), HASHING_WAIT)
    }

    /// `threads` runs at once, `RESERVED_RUNS` of them kept for `Lane::Enrolled`.
    fn with_limits(threads: usize, wait: Duration) -> Self {
        assert!(threads > RESERVED_RUNS, "no run left for Lane::Anyone");
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..threads {
            let queue = queue.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("argon2-{i}"))
                .spawn(move || {
                    let mut memory = None;
                    loop {
                        // A permit is taken before a job is sent, so a job never waits here
                        // for long; the threads end when `Hashing` is dropped.
                        let job = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        match job {
                            Ok(job) => job(memory.get_or_insert_with(Argon2Memory::new)),
                            Err(_) => return,
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::error!("cannot start an argon2 thread: {e}");
            }
        }
        Self {
            shared: Arc::new(Semaphore::new(threads - RESERVED_RUNS)),
            reserved: Arc::new(Semaphore::new(RESERVED_RUNS)),
            wait,
            jobs,
        }
    }

    async fn permit(&self, lane: Lane) -> ServiceResult<OwnedSemaphorePermit> {
        let (shared, reserved) = (self.shared.clone(), self.reserved.clone());
        let either = async move {
            match lane {
                Lane::Anyone => shared.acquire_owned().await,
                Lane::Enrolled => tokio::select! {
                    permit = reserved.acquire_owned() => permit,
                    permit = shared.acquire_owned() => permit,
                },
            }
        };
        match tokio::time::timeout(self.wait, either).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(ServiceError::Busy {
                message: "central is busy checking other credentials; retry in a second".into(),
                retry_after: 1,
            }),
        }
    }

    /// Runs `work` on a hashing thread, with its memory, once a run may start.
    async fn run<T: Send + 'static>(
        &self,
        lane: Lane,
        work: impl FnOnce(&mut Argon2Memory) -> T + Send + 'static,
    ) -> ServiceResult<T> {
        let permit = self.permit(lane).await?;
        let (done, answer) = oneshot::channel();
        let job: Job = Box::new(move |memory| {
            let answer = work(memory);
            // Given back before the answer, so that whoever reads it may start the next run.
            drop(permit);
            let _ = done.send(answer);
        });
        self.jobs
            .send(job)
            .map_err(|_| anyhow::anyhow!("the argon2 threads are gone"))?;
        Ok(answer
            .await
            .map_err(|_| anyhow::anyhow!("an argon2 run ended without an answer"))?)
    }

    /// Hashes a secret central made (or an operator's token, already checked): `Lane::Enrolled`.
    pub async fn hash(&self, secret: String) -> ServiceResult<String> {
        Ok(self
            .run(Lane::Enrolled, move |memory| hash_secret(&secret, memory))
            .await??)
    }

    pub async fn verify(
        &self,
        lane: Lane,
        secret: String,
        stored_hash: String,
    ) -> ServiceResult<bool> {
        self.run(lane, move |memory| {
            verify_secret(&secret, &stored_hash, memory)
        })
        .await
    }
}

impl Default for Hashing {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn argon2_runs_are_bounded_and_shed_past_the_wait() {
        let hashing = Hashing::with_limits(2, Duration::from_millis(50));
        let held = [
            hashing.permit(Lane::Enrolled).await.unwrap(),
            hashing.permit(Lane::Enrolled).await.unwrap(),
        ];
        for lane in [Lane::Anyone, Lane::Enrolled] {
            let shed = hashing
                .verify(lane, "secret".into(), "$argon2id$x".into())
                .await;
            assert!(matches!(shed, Err(ServiceError::Busy { .. })), "{shed:?}");
        }
        drop(held);
        let hash = hashing.hash("secret".into()).await.unwrap();
        assert!(hashing
            .verify(Lane::Anyone, "secret".into(), hash)
            .await
            .unwrap());
        let available = hashing.shared.available_permits() + hashing.reserved.available_permits();
        assert_eq!(available, 2, "permits come back");
    }

    #[tokio::test]
    async fn strangers_holding_every_shared_run_leave_enrolled_agents_a_run() {
        let hashing = Hashing::with_limits(2, Duration::from_millis(50));
        let strangers = hashing.permit(Lane::Anyone).await.unwrap();
        let shed = hashing
            .verify(Lane::Anyone, "guess".into(), "$argon2id$x".into())
            .await;
        assert!(matches!(shed, Err(ServiceError::Busy { .. })), "{shed:?}");
        let hash = hashing.hash("refresh".into()).await.unwrap();
        assert!(hashing
            .verify(Lane::Enrolled, "refresh".into(), hash)
            .await
            .unwrap());
        drop(strangers);
    }

    #[tokio::test]
    async fn every_run_is_on_one_of_the_kept_threads() {
        let hashing = Hashing::with_limits(2, Duration::from_secs(5));
        let mut names = std::collections::HashSet::new();
        for _ in 0..20 {
            let name = hashing
                .run(Lane::Anyone, |_| {
                    std::thread::current().name().map(str::to_string)
                })
                .await
                .unwrap();
            names.insert(name.unwrap_or_default());
        }
        assert!(
            names.iter().all(|n| n == "argon2-0" || n == "argon2-1"),
            "{names:?}"
        );
    }
}
