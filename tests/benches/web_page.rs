//! The operators' page with many monitors, and uptime over a year of history. Real `central`
//! (`E2E_DATABASE=postgres` for PostgreSQL), a test poller speaking the poller API, and Debian's
//! headless Chromium.
//!
//! - N monitors (default 10,000), each with 50 results: the monitors page (first page of 50,
//!   and a name search that matches nothing, which reads every monitor) timed from the client,
//!   its weight, and first contentful paint in Chromium; beside it, the same 50 monitors from
//!   the JSON API (the peer: no results, no uptime).
//! - A status page of 50 of those monitors: a rendering made afresh (the shared one expired)
//!   beside the same page from the shared rendering.
//! - One monitor with a result every hour for a year: `GET …/uptime` (rollups) beside reading
//!   the same year of raw results through `GET …/results` (what uptime would cost without them).
//!
//!   cargo bench -p e2e --bench web_page [-- --monitors 10000]

use std::time::{Duration, Instant};

use chrono::Utc;
use e2e::browser::Browser;
use e2e::{Central, ADMIN_TOKEN};
use serde_json::{json, Value};
use tokio::task::JoinSet;
use uuid::Uuid;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let monitors: usize = args
        .iter()
        .position(|a| a == "--monitors")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let central = Central::start().await?;
    let poller = central.register_poller("bench-poller").await?;
    // Bodies as sent: reqwest decompresses gzip when a build enables that feature (the agent's
    // does), which would hide the wire's size and its `Content-Encoding`.
    let http = reqwest::Client::builder().no_gzip().build()?;
    let beat = poller.keep_alive(&central.url, Duration::from_secs(5));

    let seeding = Instant::now();
    let mut ids: Vec<String> = Vec::with_capacity(monitors);
    let mut creating = JoinSet::new();
    for i in 0..monitors {
        let (http, url, poller_id) = (http.clone(), central.url.clone(), poller.id.clone());
        creating.spawn(async move {
            let spec = json!({"name": format!("service {i:05}"), "kind": "http",
                "target": format!("http://127.0.0.1:9/{i}"), "interval_ms": 60000,
                "poller_mode": "pinned", "poller_id": poller_id});
            let answer: Value = http
                .post(format!("{url}/api/v1/monitors"))
                .bearer_auth(ADMIN_TOKEN)
                .json(&spec)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            anyhow::Ok(answer["id"].as_str().unwrap_or_default().to_string())
        });
        if creating.len() >= 8 {
            ids.push(creating.join_next().await.unwrap()??);
        }
    }
    while let Some(id) = creating.join_next().await {
        ids.push(id??);
    }
    // 50 results per monitor over the last 50 minutes, every tenth one down.
    let now = Utc::now();
    let recent = ids.iter().enumerate().flat_map(|(m, id)| {
        (0..50).map(move |k| {
            let ts = now - chrono::Duration::minutes(50 - k);
            let status = if (m + k as usize).is_multiple_of(10) {
                "down"
            } else {
                "up"
            };
            json!({"id": Uuid::new_v4(), "monitor_id": id, "ts": ts.to_rfc3339(),
                "status": status, "latency_ms": 20 + (k % 7) * 5, "msg": "", "meta": {}})
        })
    });
    upload_all(&http, &central.url, &poller.access, recent).await?;
    println!(
        "seeded {monitors} monitors and {} results in {:.1} s",
        monitors * 50,
        seeding.elapsed().as_secs_f64()
    );

    // The page, from a logged-in client.
    let session = central.session_cookie().await?;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::COOKIE, session.parse()?);
    let client = reqwest::Client::builder()
        .no_gzip()
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let first_page = timed(&client, &format!("{}/", central.url), 20).await?;
    let search = timed(
        &client,
        &format!("{}/?name=no-such-monitor", central.url),
        5,
    )
    .await?;
    let api_peer = {
        let url = format!("{}/api/v1/monitors?limit=50", central.url);
        let mut times = Vec::new();
        let mut bytes = 0;
        for _ in 0..20 {
            let started = Instant::now();
            let body = http
                .get(&url)
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await?
                .bytes()
                .await?;
            times.push(started.elapsed());
            bytes = body.len();
        }
        (stats(&mut times), bytes)
    };
    report("monitors page, first 50 of N", &first_page);
    report("monitors page, name search over all N (no match)", &search);
    println!(
        "peer: GET /api/v1/monitors?limit=50 (JSON, no results/uptime): median {:.1} ms, p95 {:.1} ms, {} bytes",
        api_peer.0 .0, api_peer.0 .1, api_peer.1
    );

    // A status page of 50 of the N monitors: a rendering made afresh (the first request
    // after the shared one is 5 s old makes it) beside the same page served from the shared
    // rendering (the peer: everything but the rendering).
    let shown: Vec<&String> = ids
        .iter()
        .step_by((monitors / 50).max(1))
        .take(50)
        .collect();
    let (first_half, second_half) = shown.split_at(shown.len() / 2);
    let page: Value = http
        .post(format!("{}/api/v1/status-pages", central.url))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"slug": "bench", "title": "Bench status",
            "sections": [{"name": "API", "monitor_ids": first_half},
                         {"name": "Web", "monitor_ids": second_half}]}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    anyhow::ensure!(page["id"].is_string(), "{page}");
    let status_url = format!("{}/status/bench", central.url);
    let (mut fresh, mut shared) = (Vec::new(), Vec::new());
    let mut page_bytes = 0;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(5_100)).await;
        for times in [&mut fresh, &mut shared] {
            let started = Instant::now();
            let body = http
                .get(&status_url)
                .send()
                .await?
                .error_for_status()?
                .bytes()
                .await?;
            times.push(started.elapsed());
            page_bytes = body.len();
        }
    }
    let (fresh_median, fresh_p95) = stats(&mut fresh);
    let (shared_median, shared_p95) = stats(&mut shared);
    println!(
        "status page of 50 of {monitors} monitors, rendered afresh: median {fresh_median:.1} ms, \
         p95 {fresh_p95:.1} ms, {page_bytes} bytes of HTML"
    );
    println!(
        "peer: the same page from the shared rendering: median {shared_median:.1} ms, p95 \
         {shared_p95:.1} ms"
    );

    // First contentful paint in headless Chromium (median of 5 loads).
    let browser = Browser::start("bench_web_page").await?;
    browser.goto(&format!("{}/login", central.url)).await?;
    browser.fill("#token", ADMIN_TOKEN).await?;
    browser.click("form button[type=submit]").await?;
    browser.wait_for_path(|p| p == "/").await?;
    // Paint timing where the browser reports it; DOMContentLoaded and load from navigation
    // timing always (the page draws with no script, so DOMContentLoaded is when it can render).
    let mut loads = Vec::new();
    for _ in 0..5 {
        browser.goto(&format!("{}/", central.url)).await?;
        // Paint entries can land after `load` (the next frame): wait for them, buffered, up to 3 s.
        let timing = browser
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1]; \
                 const n = performance.getEntriesByType('navigation')[0]; \
                 const answer = (fcp) => done([fcp, n.responseEnd - n.requestStart, \
                     n.domContentLoadedEventEnd, n.loadEventEnd]); \
                 const timer = setTimeout(() => answer(-1), 3000); \
                 new PerformanceObserver((list) => { \
                     const p = list.getEntries().find(e => e.name === 'first-contentful-paint'); \
                     if (p) { clearTimeout(timer); answer(p.startTime); } \
                 }).observe({ type: 'paint', buffered: true });",
                vec![],
            )
            .await?;
        let at = |i: usize| timing[i].as_f64().unwrap_or(-1.0);
        loads.push([at(0), at(1), at(2), at(3)]);
    }
    loads.sort_by(|a, b| a[2].total_cmp(&b[2]));
    let [fcp, response, ready, loaded] = loads[loads.len() / 2];
    println!(
        "chromium (median of 5 loads): response {response:.0} ms, DOMContentLoaded {ready:.0} ms, \
         load {loaded:.0} ms, first contentful paint {fcp:.0} ms (-1: not reported)"
    );
    browser.screenshot("monitors-10k").await?;

    // A year of hourly results on one monitor: uptime from rollups vs. reading the raw year.
    let year_monitor = ids[0].clone();
    let year = (0..(365 * 24)).map(|h| {
        let ts = now - chrono::Duration::hours(365 * 24 - h);
        let status = if h % 50 == 0 { "down" } else { "up" };
        json!({"id": Uuid::new_v4(), "monitor_id": year_monitor, "ts": ts.to_rfc3339(),
            "status": status, "latency_ms": 30 + h % 40, "msg": "", "meta": {}})
    });
    upload_all(&http, &central.url, &poller.access, year).await?;
    let mut uptime_times = Vec::new();
    for _ in 0..50 {
        let started = Instant::now();
        http.get(format!(
            "{}/api/v1/monitors/{year_monitor}/uptime",
            central.url
        ))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await?
        .error_for_status()?;
        uptime_times.push(started.elapsed());
    }
    let mut raw_times = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let results = central.results(&year_monitor).await?;
        raw_times.push(started.elapsed());
        anyhow::ensure!(results.len() >= 365 * 24, "{} raw results", results.len());
    }
    let (median, p95) = stats(&mut uptime_times);
    let (raw_median, _) = stats(&mut raw_times);
    println!(
        "uptime over a year of rollups (24h/7d/30d/1y): median {median:.1} ms, p95 {p95:.1} ms"
    );
    println!(
        "peer: reading that year's {} raw results through /results: median {raw_median:.0} ms",
        365 * 24 + 50
    );
    beat.abort();
    central.stop().await;
    Ok(())
}

/// Uploads results in batches of 5,000 (the most one upload takes).
async fn upload_all(
    http: &reqwest::Client,
    url: &str,
    access: &str,
    results: impl Iterator<Item = Value>,
) -> anyhow::Result<()> {
    let mut batch = Vec::with_capacity(5_000);
    for result in results {
        batch.push(result);
        if batch.len() == 5_000 {
            upload(http, url, access, std::mem::take(&mut batch)).await?;
        }
    }
    upload(http, url, access, batch).await
}

async fn upload(
    http: &reqwest::Client,
    url: &str,
    access: &str,
    results: Vec<Value>,
) -> anyhow::Result<()> {
    if results.is_empty() {
        return Ok(());
    }
    let answer: Value = http
        .post(format!("{url}/api/poller/results"))
        .bearer_auth(access)
        .json(&json!({"batch_id": Uuid::new_v4(), "results": results}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    anyhow::ensure!(
        answer["rejected"].as_array().is_none_or(|r| r.is_empty()),
        "{answer}"
    );
    Ok(())
}

/// Median and p95 of the times, in ms.
fn stats(times: &mut [Duration]) -> (f64, f64) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (
        ms(times[times.len() / 2]),
        ms(times[(times.len() * 95 / 100).min(times.len() - 1)]),
    )
}

struct Timed {
    median_ms: f64,
    p95_ms: f64,
    bytes: usize,
    gzipped_bytes: usize,
}

async fn timed(client: &reqwest::Client, url: &str, runs: usize) -> anyhow::Result<Timed> {
    let mut times = Vec::with_capacity(runs);
    let mut bytes = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let response = client.get(url).send().await?;
        anyhow::ensure!(response.status() == 200, "{url}: {}", response.status());
        bytes = response.bytes().await?.len();
        times.push(started.elapsed());
    }
    // What a browser downloads: the client here does not decompress, so this is the wire size.
    let gzipped = client
        .get(url)
        .header(reqwest::header::ACCEPT_ENCODING, "gzip")
        .send()
        .await?;
    anyhow::ensure!(
        gzipped
            .headers()
            .get(reqwest::header::CONTENT_ENCODING)
            .is_some(),
        "{url}: not compressed"
    );
    let gzipped_bytes = gzipped.bytes().await?.len();
    let (median_ms, p95_ms) = stats(&mut times);
    Ok(Timed {
        median_ms,
        p95_ms,
        bytes,
        gzipped_bytes,
    })
}

fn report(what: &str, timed: &Timed) {
    println!(
        "{what}: median {:.1} ms, p95 {:.1} ms, {} bytes of HTML ({} gzipped)",
        timed.median_ms, timed.p95_ms, timed.bytes, timed.gzipped_bytes
    );
}
