//! Central at scale: many monitors on many test pollers that speak the poller API (register,
//! heartbeat every 10 s, checks spread over the interval as agents spread them, and results
//! uploaded as agents upload them by default: once 50 are queued or every 10 s,
//! `POLLER_BATCH_SIZE`/`POLLER_BATCH_INTERVAL`). Every monitor is up
//! and nothing changes while central's CPU is measured; then the reads operators make are
//! timed, a few monitors go down one by one (alert latency: acknowledged upload → webhook
//! received), and 1 % of them at once (time until every notice arrived). Prints one row.
//!
//!   cargo bench -p e2e --bench scale [-- --monitors 10000 --pollers 20 --interval-s 60]
//!                                    [--batch-size 50 --batch-interval-s 10]
//!                                    [--baseline PATH-TO-AN-OLDER-central]
//!                                    [--alternate PATH-TO-ANOTHER-central]
//!                                    [--grown-db-mib 1100] [--create-first]
//!
//! `--grown-db-mib N` (SQLite) first makes the database N MiB larger, with a table of the
//! bench's own, as an older database is: past 1 GiB at 4 KiB pages SQLite no longer walks the
//! writer's whole page cache at commits after a page split (docs/benchmarks.md), which a young
//! database does; 1,667 results/s grow a database past 1 GiB within its first hour.
//!
//! `--create-first` creates every monitor before any poller uploads (then waits an interval
//! for all to report, and only then adds the webhook channel: the monitors went stale while
//! waiting, truly, and up again): on a grown database, creating 100,000 monitors through the
//! API while 1,667 results/s arrive slows to a few a second near the end, since every creation
//! waits for the one writer behind the uploads; without uploads it took 15 minutes.
//!
//! (`--batch-size 1 --batch-interval-s 1` uploads every second: six times the uploads agents
//! make at 100,000 monitors on 200 pollers, a harsher load.)
//!
//! With `--baseline`, the same run is first made with that build of `central` (the figures
//! before a change, from the same machine in the same run), and both rows are printed.
//!
//! With `--alternate PATH-TO-ANOTHER-central [--rounds 4 --warm-s 60]`, after the settle the
//! two builds take turns on the one database under the one load (restarted each time, a
//! window of `--measure-s` each, in the order AB BA AB …, then `/metrics` as a scraper every
//! 7.5 s sees it), and the row gives each build's median steady CPU and `/metrics` time and
//! the mean of the paired differences: for changes of a point or two, which separate runs cannot show. Both
//! builds must run on the database the newer one migrated. A process lives one window, less
//! than the results head's 5 minutes, so on SQLite no flush falls in a window (the head is
//! rebuilt at each start, or flushed when it fills): the figure is the uploads' cost alone.
//!
//! The steady window also reports central's system calls and bytes read and written per result
//! stored (`/proc/<pid>/io`): on SQLite, mostly the WAL frames each result's pages take and the
//! checkpoints that copy them back. `SCALE_CENTRAL_LOG` sets central's `RUST_LOG` (default
//! `info`; `info,sqlx::query=debug` logs every statement with its time, in central's log in the
//! run's temporary directory).
//!
//! (prefix `E2E_DATABASE=postgres` for PostgreSQL). Figures go to docs/benchmarks.md. Each test
//! poller also keeps a long poll for its assignments open and refreshes its access token every
//! 10 minutes, as agents do.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::receivers::HttpReceiver;
use e2e::{
    anon_rss_bytes, cpu_seconds, eventually, io_counts, postgres_cpu_seconds, rss_bytes, Central,
    ADMIN_TOKEN,
};
use futures_util::StreamExt;
use serde_json::{json, Value};

fn arg_text(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn arg(name: &str, default: u64) -> u64 {
    arg_text(name)
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// The sizes of a run.
#[derive(Clone, Copy)]
struct Sizes {
    monitors: usize,
    pollers: usize,
    interval_s: u64,
    measure_s: u64,
    /// MiB the SQLite database is grown by before the run (`--grown-db-mib`).
    grown_db_mib: u64,
    /// Uploads once this many results are queued, or every `batch_interval_s`.
    batch_size: usize,
    batch_interval_s: u64,
    /// Every monitor is created before the pollers start uploading (`--create-first`).
    create_first: bool,
}

/// The monitors reported `down` (shared with the upload loops), and when each was uploaded
/// so for the first time.
type Down = Arc<Mutex<HashMap<String, Option<Instant>>>>;

/// How often a bench poller exchanges its refresh token, well within the access token's life.
const REFRESH_EVERY: Duration = Duration::from_secs(600);
/// How soon a failed refresh is tried again.
const REFRESH_RETRY: Duration = Duration::from_secs(10);

/// A test poller behaving as an agent does towards central, apart from checking: heartbeats,
/// a long poll always open, access tokens refreshed before they expire.
struct BenchPoller {
    id: String,
    access: Arc<Mutex<String>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl BenchPoller {
    /// `first_refresh`: when it first refreshes its access token (then every `REFRESH_EVERY`).
    async fn start(
        central: &Central,
        name: &str,
        first_refresh: Duration,
    ) -> anyhow::Result<BenchPoller> {
        let registered = central.register_poller(name).await?;
        let access = Arc::new(Mutex::new(registered.access.clone()));
        let http = reqwest::Client::new();
        let url = central.url.clone();
        let mut tasks = Vec::new();
        let (h, u, a) = (http.clone(), url.clone(), access.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let token = a.lock().unwrap().clone();
                let _ = h
                    .post(format!("{u}/api/poller/heartbeat"))
                    .bearer_auth(token)
                    .json(&json!({"version": "bench", "capabilities": ["http"]}))
                    .send()
                    .await;
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
        }));
        let (h, u, a) = (http.clone(), url.clone(), access.clone());
        tasks.push(tokio::spawn(async move {
            let mut since = 0i64;
            loop {
                let token = a.lock().unwrap().clone();
                let answer = h
                    .get(format!(
                        "{u}/api/poller/assignments?since_version={since}&wait=25"
                    ))
                    .bearer_auth(token)
                    .send()
                    .await;
                match answer {
                    Ok(answer) if answer.status() == 200 => {
                        if let Ok(body) = answer.json::<Value>().await {
                            since = body["version"].as_i64().unwrap_or(since);
                        }
                    }
                    _ => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            }
        }));
        let (h, u, a) = (http, url, access.clone());
        let mut refresh = registered.refresh.clone();
        let name = name.to_string();
        tasks.push(tokio::spawn(async move {
            let mut wait = first_refresh;
            loop {
                tokio::time::sleep(wait).await;
                // A refresh that failed (central shedding load, say) is tried again soon, as
                // agents do: waiting a whole period would let the access token expire, and
                // the poller's 401s would lock its address out (a 100,000-monitor run whose
                // creation took an hour ended so).
                wait = REFRESH_RETRY;
                // Bounded: a refresh stuck behind a loaded central must not sit out the
                // access token's life (a 100,000-monitor run lost a poller's token so).
                let answer = h
                    .post(format!("{u}/api/poller/token"))
                    .timeout(Duration::from_secs(30))
                    .json(&json!({"refresh_token": refresh}))
                    .send()
                    .await;
                let body = match answer {
                    Ok(answer) if answer.status().is_success() => {
                        answer.json::<Value>().await.unwrap_or_default()
                    }
                    Ok(answer) => {
                        eprintln!("scale: refreshing {name} answered {}", answer.status());
                        continue;
                    }
                    Err(e) => {
                        eprintln!("scale: refreshing {name} failed: {e}");
                        continue;
                    }
                };
                // Only a pair read whole counts: otherwise try again soon.
                if let (Some(access), Some(next)) = (
                    body["access_token"].as_str(),
                    body["refresh_token"].as_str(),
                ) {
                    *a.lock().unwrap() = access.to_string();
                    refresh = next.to_string();
                    wait = REFRESH_EVERY;
                }
            }
        }));
        Ok(BenchPoller {
            id: registered.id,
            access,
            tasks,
        })
    }

    fn token(&self) -> String {
        self.access.lock().unwrap().clone()
    }
}

/// One test poller's upload loop, from `start` on (pollers' starts are spread over an upload
/// interval, as agents started at different times are): each second, the results of its
/// monitors whose phase is this second of the interval join the queue; the queue is
/// uploaded, in batches of `batch_size`, once it holds that many or `batch_interval_s` after
/// the last upload.
fn uploads(
    central: &Central,
    poller: &BenchPoller,
    monitors: Arc<Mutex<Vec<String>>>,
    sizes: Sizes,
    start: Duration,
    down: Down,
    accepted: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    let interval_s = sizes.interval_s;
    let (http, url, access) = (
        reqwest::Client::new(),
        central.url.clone(),
        poller.access.clone(),
    );
    tokio::spawn(async move {
        tokio::time::sleep(start).await;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut second = 0u64;
        let mut queued: Vec<Value> = Vec::new();
        let mut uploaded_at = Instant::now();
        loop {
            tick.tick().await;
            let due: Vec<String> = monitors
                .lock()
                .unwrap()
                .iter()
                .enumerate()
                .filter(|(i, _)| *i as u64 % interval_s == second % interval_s)
                .map(|(_, id)| id.clone())
                .collect();
            second += 1;
            let now = chrono::Utc::now().to_rfc3339();
            let results: Vec<Value> = {
                let down = down.lock().unwrap();
                due.iter()
                    .map(|id| {
                        let status = if down.contains_key(id) { "down" } else { "up" };
                        json!({"id": uuid::Uuid::now_v7(), "monitor_id": id, "ts": now,
                               "status": status, "latency_ms": 3, "msg": "", "meta": {}})
                    })
                    .collect()
            };
            queued.extend(results);
            let waited = uploaded_at.elapsed() >= Duration::from_secs(sizes.batch_interval_s);
            if queued.is_empty() || (queued.len() < sizes.batch_size && !waited) {
                continue;
            }
            uploaded_at = Instant::now();
            let batches: Vec<Vec<Value>> = std::mem::take(&mut queued)
                .chunks(sizes.batch_size.max(1))
                .map(<[Value]>::to_vec)
                .collect();
            let mut batches = batches.into_iter();
            while let Some(batch) = batches.next() {
                let token = access.lock().unwrap().clone();
                let answer = http
                    .post(format!("{url}/api/poller/results"))
                    .bearer_auth(token)
                    .json(&json!({"batch_id": uuid::Uuid::new_v4(), "results": batch}))
                    .send()
                    .await;
                let ack = match answer {
                    Ok(answer) if answer.status().is_success() => answer.json::<Value>().await.ok(),
                    _ => None,
                };
                let Some(ack) = ack else {
                    // Kept, as an agent keeps what central did not acknowledge (central
                    // restarting between `--alternate` windows): tried again at the next
                    // upload, so that no monitor goes stale. Result ids make a retry of a
                    // stored batch a duplicate, not a second result.
                    queued = batch.into_iter().chain(batches.flatten()).collect();
                    break;
                };
                let stored = ack["accepted"].as_u64().unwrap_or(0);
                accepted.fetch_add(stored, Ordering::Relaxed);
            }
        }
    })
}

/// Uploads `down` results for `ids` at once (one batch per poller); returns when each was
/// acknowledged.
async fn report_down(
    central: &Central,
    owners: &HashMap<String, Arc<BenchPoller>>,
    ids: &[String],
    down: &Down,
) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let mut by_poller: HashMap<String, Vec<&String>> = HashMap::new();
    for id in ids {
        by_poller.entry(owners[id].token()).or_default().push(id);
        down.lock().unwrap().insert(id.clone(), None);
    }
    let now = chrono::Utc::now().to_rfc3339();
    for (token, ids) in by_poller {
        let results: Vec<Value> = ids
            .iter()
            .map(|id| {
                json!({"id": uuid::Uuid::now_v7(), "monitor_id": id, "ts": now,
                       "status": "down", "latency_ms": 3, "msg": "", "meta": {}})
            })
            .collect();
        let answer: Value = http
            .post(format!("{}/api/poller/results", central.url))
            .bearer_auth(token)
            .json(&json!({"batch_id": uuid::Uuid::new_v4(), "results": results}))
            .send()
            .await?
            .json()
            .await?;
        anyhow::ensure!(
            answer["accepted"].as_u64() == Some(ids.len() as u64),
            "{answer}"
        );
        let acked = Instant::now();
        let mut down = down.lock().unwrap();
        for id in ids {
            down.insert(id.clone(), Some(acked));
        }
    }
    Ok(())
}

/// The median of `runs` timings of `request`, in ms.
async fn timed<F, Fut>(runs: usize, mut request: F) -> anyhow::Result<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut took = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        request().await?;
        took.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    took.sort_by(f64::total_cmp);
    Ok(took[took.len() / 2])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sizes = Sizes {
        monitors: arg("--monitors", 10_000) as usize,
        pollers: arg("--pollers", 20) as usize,
        interval_s: arg("--interval-s", 60),
        measure_s: arg("--measure-s", 30),
        grown_db_mib: arg("--grown-db-mib", 0),
        batch_size: arg("--batch-size", 50) as usize,
        batch_interval_s: arg("--batch-interval-s", 10),
        create_first: std::env::args().any(|a| a == "--create-first"),
    };
    let alternate = arg_text("--alternate").map(|other| Alternate {
        other: other.into(),
        rounds: arg("--rounds", 4),
        warm_s: arg("--warm-s", 60),
    });
    let mut rows = Vec::new();
    if let Some(baseline) = arg_text("--baseline") {
        rows.push(run("baseline", Path::new(&baseline), sizes, None).await?);
    }
    rows.push(
        run(
            "this build",
            &e2e::binary("central"),
            sizes,
            alternate.as_ref(),
        )
        .await?,
    );
    for row in rows {
        println!("{row}");
    }
    Ok(())
}

/// One run against `program`; returns its row. With `alternate`, the run ends after the
/// settle with `alternating`'s row.
async fn run(
    label: &str,
    program: &Path,
    sizes: Sizes,
    alternate: Option<&Alternate>,
) -> anyhow::Result<String> {
    let Sizes {
        monitors,
        pollers,
        interval_s,
        measure_s,
        grown_db_mib,
        batch_size,
        batch_interval_s,
        create_first,
    } = sizes;
    let backend = std::env::var("E2E_DATABASE").unwrap_or_else(|_| "sqlite".into());
    // Every test poller speaks from 127.0.0.1, which real pollers do not: neither the
    // registration rate nor the per-client connection cap applies to them here.
    let mut central = Central::start_program(
        program,
        &[
            ("CENTRAL_AUTH_RATE_LIMIT", "0"),
            ("CENTRAL_MAX_CONNECTIONS_PER_CLIENT", "10000"),
            (
                "RUST_LOG",
                &std::env::var("SCALE_CENTRAL_LOG").unwrap_or_else(|_| "info".into()),
            ),
        ],
    )
    .await?;
    if grown_db_mib > 0 && backend == "sqlite" {
        central.kill().await;
        grow(&central.dir.path().join("central.db"), grown_db_mib)?;
        central.restart().await?;
    }
    let pid = central.pid().expect("central runs");
    let receiver = HttpReceiver::start().await?;
    let channel = json!({"name": "bench", "kind": "webhook", "url": receiver.url, "default": true});
    // Created first, the monitors go stale while the others are made (nobody reports on them:
    // central says so), and up again when the uploads start: the channel comes before the
    // uploads, so that their recovery is told and timed as an operator's would be.
    if !create_first {
        central.create_channel(channel.clone()).await?;
    }
    let mut registered = Vec::with_capacity(pollers);
    for i in 0..pollers {
        registered.push(Arc::new(
            // Agents registered at different times refresh at different times: the bench's,
            // registered together, would all exchange their tokens (a slow hash each) in the
            // same seconds, in the middle of what is measured.
            BenchPoller::start(
                &central,
                &format!("scale-{i}"),
                REFRESH_EVERY.mul_f64((i + 1) as f64 / pollers as f64),
            )
            .await?,
        ));
    }

    // Uploads start with the first monitor: each reports from its first second on, so none
    // goes stale while the others are being created (unless `--create-first`).
    let owned: Vec<Arc<Mutex<Vec<String>>>> = (0..pollers).map(|_| Arc::default()).collect();
    let down: Down = Arc::default();
    // Results the upload loops had acknowledged as stored (for the I/O per result).
    let accepted = Arc::new(AtomicU64::new(0));
    let start_uploads = || -> Vec<tokio::task::JoinHandle<()>> {
        registered
            .iter()
            .zip(&owned)
            .enumerate()
            .map(|(i, (poller, mine))| {
                let start = Duration::from_millis(
                    batch_interval_s * 1000 * i as u64 / pollers.max(1) as u64,
                );
                uploads(
                    &central,
                    poller,
                    mine.clone(),
                    sizes,
                    start,
                    down.clone(),
                    accepted.clone(),
                )
            })
            .collect()
    };
    let mut loops = if create_first {
        Vec::new()
    } else {
        start_uploads()
    };
    let created = Instant::now();
    let specs: Vec<(usize, String)> = (0..monitors)
        .map(|i| (i, registered[i % pollers].id.clone()))
        .collect();
    let ids: Vec<(usize, String)> = futures_util::stream::iter(specs)
        .map(|(i, poller)| {
            let (central, owned) = (&central, &owned);
            async move {
                let id = central
                    .create_monitor(json!({"name": format!("m{i}"), "kind": "http",
                        "target": format!("http://127.0.0.1:9/{i}"),
                        "interval_ms": interval_s * 1000,
                        "poller_mode": "pinned", "poller_id": poller}))
                    .await?;
                owned[i % pollers].lock().unwrap().push(id.clone());
                anyhow::Ok((i, id))
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;
    let creating = created.elapsed();
    let recovery = if create_first {
        // Every monitor stale first, as after a long outage of every poller: a new monitor
        // is pending for an interval and its grace.
        eventually(Duration::from_secs(1800), "no monitor pending", || async {
            (none_shown(&central, "pending").await == Some(true)).then_some(())
        })
        .await?;
        central.create_channel(channel).await?;
        loops = start_uploads();
        let line = recover(&central, &receiver, pid, monitors).await?;
        // The recovery's tail (looks still due, notices still queued) is not a steady state:
        // on SQLite the window waits until alerting has no past instant left to look at.
        let caught_up = if backend == "sqlite" {
            let db = central.dir.path().join("central.db");
            format!(", {}", alerting_caught_up(&db).await?)
        } else {
            String::new()
        };
        Some(format!("{line}{caught_up}"))
    } else {
        None
    };
    let owners: HashMap<String, Arc<BenchPoller>> = ids
        .iter()
        .map(|(i, id)| (id.clone(), registered[i % pollers].clone()))
        .collect();
    // One whole interval and one upload wait, so that every monitor has a result and is up,
    // and a little more (created first: recovered and told already, and steady after that).
    let settle = interval_s + batch_interval_s + 5;
    tokio::time::sleep(Duration::from_secs(settle)).await;

    if let Some(alternate) = alternate {
        let row = alternating(&mut central, program, alternate, measure_s, &accepted).await;
        for task in loops.iter().chain(registered.iter().flat_map(|p| &p.tasks)) {
            task.abort();
        }
        return Ok(format!(
            "scale ({backend}, alternating): {monitors} monitors / {pollers} pollers / {:.0} \
             results/s | {}",
            monitors as f64 / interval_s as f64,
            row?
        ));
    }

    // Notices before this (a recovery's) are not the steps' below.
    let told_before = receiver.count();
    // On stderr, for a profiler to attach to central for the steady window.
    eprintln!("steady window: {measure_s} s from now, central pid {pid}");
    let (cpu_before, wall) = (cpu_seconds(pid).unwrap_or(0.0), Instant::now());
    let (io_before, accepted_before) = (io_counts(pid), accepted.load(Ordering::Relaxed));
    let server_before = postgres_cpu_seconds();
    // The load's own cost: this process (the pollers, the receiver) shares the 2 cores with
    // central, which every timed figure below waits on as well.
    let load_before = cpu_seconds(std::process::id()).unwrap_or(0.0);
    tokio::time::sleep(Duration::from_secs(measure_s)).await;
    let steady_cpu = (cpu_seconds(pid).unwrap_or(0.0) - cpu_before) / wall.elapsed().as_secs_f64();
    let load_cpu = (cpu_seconds(std::process::id()).unwrap_or(0.0) - load_before)
        / wall.elapsed().as_secs_f64();
    // Beside central's, on PostgreSQL: the server's processes share the 2 cores.
    let server = if backend == "postgres" {
        let used = (postgres_cpu_seconds() - server_before) / wall.elapsed().as_secs_f64();
        format!(" (PostgreSQL's processes {:.0} %)", used * 100.0)
    } else {
        String::new()
    };
    // System calls and bytes per result stored in the window: on SQLite mostly the pages each
    // result dirties, written to the WAL (a header and a page per frame) and copied back by
    // checkpoints; on PostgreSQL central's side of the connection only.
    let results = accepted
        .load(Ordering::Relaxed)
        .saturating_sub(accepted_before)
        .max(1) as f64;
    let io = match (io_before, io_counts(pid)) {
        (Some(a), Some(b)) => format!(
            "{:.1} writes ({:.1} KB) and {:.1} reads ({:.1} KB) per result",
            (b.write_calls - a.write_calls) as f64 / results,
            (b.written_bytes - a.written_bytes) as f64 / results / 1000.0,
            (b.read_calls - a.read_calls) as f64 / results,
            (b.read_bytes - a.read_bytes) as f64 / results / 1000.0,
        ),
        _ => "I/O unreadable".into(),
    };
    // At once: a long run's main figure must not depend on the steps after it.
    eprintln!(
        "steady: central CPU {:.0} % of a core{server}, the load {:.0} %, RSS {} MB ({} MB its own), {io} ({results:.0} results)",
        steady_cpu * 100.0,
        load_cpu * 100.0,
        rss_bytes(pid).unwrap_or(0) / 1_000_000,
        anon_rss_bytes(pid).unwrap_or(0) / 1_000_000
    );

    let http = reqwest::Client::new();
    let get = |path: String| {
        let (http, url) = (http.clone(), central.url.clone());
        async move {
            let answer = http
                .get(format!("{url}{path}"))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await?;
            anyhow::ensure!(answer.status() == 200, "{path}: {}", answer.status());
            answer.bytes().await?;
            anyhow::Ok(())
        }
    };
    let one = ids[monitors / 2].1.clone();
    let down_list = timed(5, || get("/api/v1/monitors?status=down".into())).await?;
    let page = timed(5, || get("/api/v1/monitors?limit=50".into())).await?;
    let status = timed(5, || get(format!("/api/v1/monitors/{one}/status"))).await?;
    let (metrics, metrics_ahead) = scrape_ms(&central).await?;

    // One by one: alert latency.
    let singles: Vec<String> = ids.iter().take(50).map(|(_, id)| id.clone()).collect();
    for id in &singles {
        report_down(&central, &owners, std::slice::from_ref(id), &down).await?;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    // Counted in place: the receiver holds a recovery's 100,000 notices by now.
    let told_down = |among: &[String]| {
        let among: HashSet<&str> = among.iter().map(String::as_str).collect();
        receiver.count_matching(|r| {
            r.json["event"] == "monitor.down"
                && r.json["monitor"]["id"]
                    .as_str()
                    .is_some_and(|id| among.contains(id))
        })
    };
    // A build that cannot keep up still gets a row: what arrived within the wait.
    let _ = eventually(Duration::from_secs(60), "every single notice", || async {
        (told_down(&singles) >= singles.len()).then_some(())
    })
    .await;
    let latency_of = |wanted: &HashSet<String>| -> Vec<f64> {
        let down = down.lock().unwrap();
        let mut latencies: Vec<f64> = receiver
            .received()
            .iter()
            .filter(|r| r.json["event"] == "monitor.down")
            .filter_map(|r| {
                let monitor = r.json["monitor"]["id"].as_str()?;
                wanted.contains(monitor).then_some(())?;
                let acked = (*down.get(monitor)?)?;
                Some(r.at.saturating_duration_since(acked).as_secs_f64() * 1000.0)
            })
            .collect();
        latencies.sort_by(f64::total_cmp);
        latencies
    };
    let single = latency_of(&singles.iter().cloned().collect());
    let pick = |l: &[f64], q: f64| {
        l.get(((l.len().max(1) - 1) as f64 * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };

    // 1 % at once.
    let burst: Vec<String> = ids
        .iter()
        .skip(20)
        .take(monitors / 100)
        .map(|(_, id)| id.clone())
        .collect();
    let started = Instant::now();
    report_down(&central, &owners, &burst, &down).await?;
    let burst_all = eventually(Duration::from_secs(120), "every burst notice", || async {
        (told_down(&burst) >= burst.len()).then_some(())
    })
    .await
    .map(|()| format!("all told in {:.2} s", started.elapsed().as_secs_f64()))
    .unwrap_or_else(|_| format!("{} told in 120 s", told_down(&burst)));

    // Nothing arriving: uploads stop (heartbeats go on).
    for upload in &loops {
        upload.abort();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The results head (SQLite) is flushed every 5 minutes, whether results arrive or not: a
    // window that holds a flush measures the results before it, not the idle central. Seen by
    // the head's gauge, read outside the window; such a window is measured again (at most
    // twice: flushes are minutes apart) and shown beside.
    let mut idle_cpu = f64::NAN;
    let mut with_flush = Vec::new();
    for _ in 0..3 {
        let head_before = head_rows(&central).await;
        let (cpu_before, wall) = (cpu_seconds(pid).unwrap_or(0.0), Instant::now());
        tokio::time::sleep(Duration::from_secs(10)).await;
        let cpu = (cpu_seconds(pid).unwrap_or(0.0) - cpu_before) / wall.elapsed().as_secs_f64();
        if head_rows(&central).await < head_before {
            with_flush.push(format!("{:.0} %", cpu * 100.0));
            continue;
        }
        idle_cpu = cpu;
        break;
    }
    let with_flush = if with_flush.is_empty() {
        String::new()
    } else {
        format!(
            " (windows holding the head's flush, measured again: {})",
            with_flush.join(", ")
        )
    };
    for poller in &registered {
        for task in &poller.tasks {
            task.abort();
        }
    }
    let others = receiver.received()[told_before..]
        .iter()
        .filter(|r| r.json["event"] != "monitor.down")
        .count();
    let others = if others > 0 {
        format!(" | notices other than the downs caused: {others} (none expected)")
    } else {
        String::new()
    };
    let grown = if grown_db_mib > 0 {
        format!(" grown by {grown_db_mib} MiB")
    } else {
        String::new()
    };
    let grown = match &recovery {
        Some(recovery) => format!("{grown}, created first; {recovery}"),
        None => grown,
    };
    Ok(format!(
        "scale ({backend}{grown}, {label}): {monitors} monitors / {pollers} pollers / {:.0} results/s, \
         uploads of {batch_size} or every {batch_interval_s} s (created in {:.0} s) | CPU steady {:.0} % of a core{server} (the load {:.0} %), no results {:.0} %{with_flush} | alert latency \
         ({} of {} told) p50 {:.0} ms, p99 {:.0} ms | ?status=down {:.0} ms, page of 50 {:.0} ms, \
         /metrics {:.0} ms (a steady scraper's {:.0} ms), one status {:.1} ms | 1 % down ({}) {} | RSS {} MB ({} MB its own) | steady: {io}{others}",
        monitors as f64 / interval_s as f64,
        creating.as_secs_f64(),
        steady_cpu * 100.0,
        load_cpu * 100.0,
        idle_cpu * 100.0,
        single.len(),
        singles.len(),
        pick(&single, 0.5),
        pick(&single, 0.99),
        down_list,
        page,
        metrics,
        metrics_ahead,
        status,
        burst.len(),
        burst_all,
        rss_bytes(pid).unwrap_or(0) / 1_000_000,
        anon_rss_bytes(pid).unwrap_or(0) / 1_000_000
    ))
}

/// `--alternate`: a second build of central, run in turn with this one on the same database
/// and the same load, so that a difference of a point or two of a core shows: separate runs
/// of one build spread about ten points between hosts (docs/benchmarks.md).
struct Alternate {
    other: PathBuf,
    /// Rounds of two windows, in the order AB, BA, AB, … (a drift over the run, such as the
    /// database growing, weighs on both builds alike).
    rounds: u64,
    /// Seconds between a restart and its window: the new process takes the lease, looks at
    /// the monitors that went stale while it was down and fills its page cache.
    warm_s: u64,
}

/// Central's steady CPU, window by window, with `this` and `alternate.other` in turn (restarted
/// on the same database and address; the test pollers carry on, and keep what a restart left
/// unacknowledged), and after each window the median of the first three `/metrics` scrapes
/// (`scrape_ms`); returns each build's medians and the mean of the paired differences.
///
/// The mean over AB, BA pairs of rounds cancels a steady drift (the first run of this mode
/// read 19, 22, 21, 23, 24, 23 % over its six windows, whichever build ran), which a median
/// of the differences does not: an even number of rounds is best.
async fn alternating(
    central: &mut Central,
    this: &Path,
    alternate: &Alternate,
    window_s: u64,
    accepted: &AtomicU64,
) -> anyhow::Result<String> {
    let builds = [this, alternate.other.as_path()];
    let mut cpu: [Vec<f64>; 2] = Default::default();
    let mut scrapes: [Vec<f64>; 2] = Default::default();
    // PostgreSQL's own processes, read only on that backend (`postgres_cpu_seconds`).
    let postgres = std::env::var("E2E_DATABASE").is_ok_and(|b| b == "postgres");
    let mut server: [Vec<f64>; 2] = Default::default();
    let mut differences = Vec::new();
    for round in 0..alternate.rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut pair = [0.0; 2];
        for build in order {
            central.set_program(builds[build]);
            if let Err(e) = central.restart().await {
                let log = central.log();
                let lines: Vec<&str> = log.lines().collect();
                let tail = lines[lines.len().saturating_sub(20)..].join("\n");
                anyhow::bail!(
                    "{} did not start on this database ({e}); its log ends:\n{tail}",
                    builds[build].display()
                );
            }
            let pid = central.pid().expect("central runs");
            tokio::time::sleep(Duration::from_secs(alternate.warm_s)).await;
            let (cpu_before, wall) = (cpu_seconds(pid).unwrap_or(0.0), Instant::now());
            let accepted_before = accepted.load(Ordering::Relaxed);
            let server_before = postgres_cpu_seconds();
            tokio::time::sleep(Duration::from_secs(window_s)).await;
            let seconds = wall.elapsed().as_secs_f64();
            let used = (cpu_seconds(pid).unwrap_or(0.0) - cpu_before) / seconds;
            let server_used = (postgres_cpu_seconds() - server_before) / seconds * 100.0;
            let results = (accepted.load(Ordering::Relaxed) - accepted_before) as f64 / seconds;
            let scrape = scrape_ms(central).await?.0;
            eprintln!(
                "alternating: round {round}, {}: {:.1} % of a core{}, {results:.0} results/s, \
                 /metrics {scrape:.0} ms",
                builds[build].display(),
                used * 100.0,
                if postgres {
                    format!(" (PostgreSQL's processes {server_used:.1} %)")
                } else {
                    String::new()
                }
            );
            server[build].push(server_used);
            pair[build] = used;
            cpu[build].push(used * 100.0);
            scrapes[build].push(scrape);
        }
        differences.push((pair[1] - pair[0]) * 100.0);
    }
    let median = |values: &[f64]| {
        let mut values = values.to_vec();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let mean = differences.iter().sum::<f64>() / differences.len() as f64;
    let differences_text: Vec<String> = differences.iter().map(|d| format!("{d:+.1}")).collect();
    let other = alternate.other.display();
    let server = if postgres {
        format!(
            " | PostgreSQL's processes: with this build {:.1} % of a core, with {other} {:.1} % \
             (medians)",
            median(&server[0]),
            median(&server[1])
        )
    } else {
        String::new()
    };
    Ok(format!(
        "{} rounds of {window_s} s windows ({} s warm after each restart) | CPU: this build \
         {:.1} % of a core, {other} {:.1} % (medians); {other} minus this build, per round: {} \
         points, mean {mean:+.1}{server} | /metrics: this build {:.0} ms, {other} {:.0} ms \
         (medians)",
        alternate.rounds,
        alternate.warm_s,
        median(&cpu[0]),
        median(&cpu[1]),
        differences_text.join(", "),
        median(&scrapes[0]),
        median(&scrapes[1]),
    ))
}

/// `/metrics` as a scraper that comes every 7.5 s sees it, in ms (past the 5 s cache, with room
/// for central to render ahead, which it does no sooner than 5 s after its last rendering):
/// the median of its first three scrapes, each waiting for its rendering (central guesses a
/// scraper's rhythm only once two intervals agree), and the slower of the next two, whose
/// texts central renders just before they come (`service::scrape`).
async fn scrape_ms(central: &Central) -> anyhow::Result<(f64, f64)> {
    let http = reqwest::Client::new();
    let mut took = Vec::new();
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(7_500)).await;
        let started = Instant::now();
        let answer = http
            .get(format!("{}/metrics", central.url))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await?;
        anyhow::ensure!(answer.status() == 200, "/metrics: {}", answer.status());
        answer.bytes().await?;
        took.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let steady = took[3].max(took[4]);
    took.truncate(3);
    took.sort_by(f64::total_cmp);
    Ok((took[1], steady))
}

/// The results head's rows (`central_results_head_rows` on `/metrics`; 0 on PostgreSQL and
/// when unreadable).
async fn head_rows(central: &Central) -> u64 {
    let text = async {
        reqwest::Client::new()
            .get(format!("{}/metrics", central.url))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()
    };
    text.await
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("central_results_head_rows "))
                .and_then(|value| value.trim().parse::<f64>().ok())
        })
        .map_or(0, |rows| rows as u64)
}

/// Whether no monitor is shown with `status` (`None`: the answer was unreadable).
async fn none_shown(central: &Central, status: &str) -> Option<bool> {
    let page: Value = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/monitors?status={status}&limit=1",
            central.url
        ))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    page["items"].as_array().map(Vec::is_empty)
}

/// After every monitor was stale and the uploads started: how long until no monitor's status
/// is stale (`?status=stale` empty: the API derives each status from the stored results, so
/// this is every monitor's result in, whether or not alerting has looked at it yet; bounded at
/// 30 minutes), and until every `monitor.up` was told (bounded at 10 minutes: what arrived by
/// then is counted), with central's CPU meanwhile. Alerting's own pace is between the two (its
/// `notifying` lines in central's log).
async fn recover(
    central: &Central,
    receiver: &HttpReceiver,
    pid: u32,
    monitors: usize,
) -> anyhow::Result<String> {
    let (cpu_before, started) = (cpu_seconds(pid).unwrap_or(0.0), Instant::now());
    let limit = Duration::from_secs(1800);
    let looked = eventually(limit, "no monitor's status stale", || async {
        (none_shown(central, "stale").await == Some(true)).then_some(started.elapsed())
    })
    .await?;
    // Each monitor was told stale (to no channel yet) and is told up again: one notice each.
    // A pause in deliveries is no end (a busy writer holds them up): they are counted.
    let told_by = Duration::from_secs(600);
    while receiver.count() < monitors && started.elapsed() < told_by {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (count, told) = (receiver.count(), started.elapsed());
    let cpu = (cpu_seconds(pid).unwrap_or(0.0) - cpu_before) / told.as_secs_f64();
    let line = format!(
        "no status stale {:.0} s after the uploads started, {count} of {monitors} \
         `monitor.up` told in {:.0} s, central CPU meanwhile {:.0} % of a core",
        looked.as_secs_f64(),
        told.as_secs_f64(),
        cpu * 100.0
    );
    eprintln!("{line}");
    Ok(line)
}

/// Waits (at most 10 minutes) until `alert_due` holds no instant more than 5 s past, read
/// from the SQLite database beside central: alerting has caught up with what the recovery
/// left due. Says how long that took, or how many rows were still past.
async fn alerting_caught_up(path: &Path) -> anyhow::Result<String> {
    let started = Instant::now();
    let db =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    loop {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis() as i64;
        let past: i64 = db.query_row(
            "SELECT COUNT(*) FROM alert_due WHERE due_at < ?1",
            [now_ms - 5_000],
            |row| row.get(0),
        )?;
        if past == 0 || started.elapsed() > Duration::from_secs(600) {
            let line = format!(
                "alerting caught up {:.0} s later ({past} looks past)",
                started.elapsed().as_secs_f64()
            );
            eprintln!("{line}");
            return Ok(line);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Makes the SQLite database at `path` `mib` MiB larger (a table of the bench's own, of
/// zero-filled blobs, written back into the database file), while central is stopped.
fn grow(path: &Path, mib: u64) -> anyhow::Result<()> {
    let db = rusqlite::Connection::open(path)?;
    db.execute_batch("CREATE TABLE bench_filler (b BLOB NOT NULL)")?;
    let tx = db.unchecked_transaction()?;
    for _ in 0..mib {
        tx.execute(
            "INSERT INTO bench_filler (b) VALUES (zeroblob(1048576))",
            [],
        )?;
    }
    tx.commit()?;
    db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    let pages: u64 = db.query_row("PRAGMA page_count", [], |row| row.get(0))?;
    eprintln!("database grown to {pages} pages");
    Ok(())
}
