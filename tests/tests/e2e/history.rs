//! History through the real binaries: rollups counted once at ingest, uptime and bucketed
//! history read from them, and raw results pruned after their retention except the status
//! changes, without the rollups losing anything.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use e2e::{eventually, Central};
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uptime_and_history_come_from_rollups_that_outlive_pruned_results() -> anyhow::Result<()> {
    let mut central = Central::start_with(&[("CENTRAL_RESULTS_RETENTION", "1d")]).await?;
    let http = reqwest::Client::new();
    let access = central.register_poller("fake-agent").await?.access;
    let monitor = central
        .create_monitor(
            json!({"name": "m", "kind": "http", "target": "http://127.0.0.1:9/",
            "interval_ms": 60_000}),
        )
        .await?;

    // Three days ago, a minute apart: up ×5, down ×3, up ×4 (latency 100 ms when up).
    let old_start = Utc::now() - Duration::days(3);
    let old: Vec<(DateTime<Utc>, &str, u64)> = ["up"; 5]
        .into_iter()
        .chain(["down"; 3])
        .chain(["up"; 4])
        .enumerate()
        .map(|(i, status)| (old_start + Duration::minutes(i as i64), status, 100))
        .collect();
    // The last half hour: ten ups at 10, 20, …, 100 ms and one down.
    let recent_start = Utc::now() - Duration::minutes(30);
    let recent: Vec<(DateTime<Utc>, &str, u64)> = (1..=10)
        .map(|i| (recent_start + Duration::minutes(i), "up", 10 * i as u64))
        .chain([(recent_start + Duration::minutes(11), "down", 5_000)])
        .collect();
    let ids: Vec<String> = (0..old.len() + recent.len())
        .map(|_| Uuid::new_v4().to_string())
        .collect();
    let results: Vec<Value> = old
        .iter()
        .chain(&recent)
        .zip(&ids)
        .map(|((ts, status, latency), id)| {
            json!({"id": id, "monitor_id": monitor, "ts": stamp(*ts), "status": status,
                   "latency_ms": latency, "msg": "", "meta": {}})
        })
        .collect();
    let batch = json!({"batch_id": Uuid::new_v4(), "results": results});
    for _ in 0..2 {
        http.post(format!("{}/api/poller/results", central.url))
            .bearer_auth(&access)
            .json(&batch)
            .send()
            .await?
            .error_for_status()?;
    }

    // Uptime is time: each result stands for the minute until the next, at most 66 s (the
    // interval, the check's 5 s timeout and a second); the newest, down, for its whole 66 s
    // by now.
    let before = uptime(&central, &monitor).await?;
    assert_eq!(before["24h"]["checks"], 11, "{before}");
    assert_eq!(
        (&before["24h"]["up_ms"], &before["24h"]["down_ms"]),
        (&json!(600_000), &json!(66_000)),
        "{before}"
    );
    assert_eq!(
        before["24h"]["unmeasured_ms"],
        86_400_000 - 666_000,
        "the window is exactly a day"
    );
    let day_uptime = before["24h"]["uptime"].as_f64().unwrap();
    assert!(
        (day_uptime - 100.0 * 600.0 / 666.0).abs() < 1e-9,
        "{before}"
    );
    assert_eq!(
        before["24h"]["latency_ms_mean"], 55.0,
        "the down's 5 s is not latency"
    );
    let p95 = before["24h"]["latency_ms_p95"].as_u64().unwrap();
    assert!(
        (75..=100).contains(&p95),
        "p95 of 10…100 ms in its band: {p95}"
    );
    // Three days ago: 5 up minutes, 3 down, 3 up, and the last up's cap of 66 s (the next
    // result is days later: the silence between is unmeasured, not up).
    assert_eq!(before["7d"]["checks"], 23, "{before}");
    assert_eq!(
        (&before["7d"]["up_ms"], &before["7d"]["down_ms"]),
        (&json!(1_146_000), &json!(246_000)),
        "{before}"
    );
    let uptime_7d = before["7d"]["uptime"].as_f64().unwrap();
    assert!(
        (uptime_7d - 100.0 * 1_146.0 / 1_392.0).abs() < 1e-9,
        "{uptime_7d}"
    );
    for field in ["checks", "up_ms", "down_ms", "uptime", "latency_ms_mean"] {
        assert_eq!(
            before["1y"][field], before["7d"][field],
            "a year of days holds the same {field}"
        );
    }
    assert_eq!(
        before["1y"]["unmeasured_ms"].as_i64().unwrap(),
        365 * 86_400_000_i64 - 1_392_000,
        "a year is 365 days"
    );

    let history = |resolution: &str, since: DateTime<Utc>| {
        let since = stamp(since).replace('+', "%2B");
        format!("/api/v1/monitors/{monitor}/history?resolution={resolution}&since={since}")
    };
    let (status, hours) = central
        .admin(
            Method::GET,
            &history("hour", old_start - Duration::hours(1)),
            None,
        )
        .await?;
    assert_eq!(status, 200, "{hours}");
    let buckets = hours["buckets"].as_array().unwrap();
    let totals: u64 = buckets.iter().map(|b| b["total"].as_u64().unwrap()).sum();
    assert_eq!(totals, 23, "{hours}");
    let first = &buckets[0];
    assert_eq!(first["latency_ms_min"], 100, "{first}");
    assert!(
        first["start"].as_str().unwrap().ends_with(":00:00Z"),
        "{first}"
    );

    // Refusals name the field.
    for (path, field) in [
        (
            format!("/api/v1/monitors/{monitor}/history?resolution=week"),
            "resolution",
        ),
        (
            format!("/api/v1/monitors/{monitor}/history?resolution=day&since=yesterday"),
            "since",
        ),
        (
            format!("/api/v1/monitors/{monitor}/uptime?region=no%20spaces"),
            "region",
        ),
    ] {
        let (status, body) = central.admin(Method::GET, &path, None).await?;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body["message"].as_str().unwrap().contains(field), "{body}");
    }
    let (status, _) = central
        .admin(
            Method::GET,
            &format!("/api/v1/monitors/{}/uptime", Uuid::new_v4()),
            None,
        )
        .await?;
    assert_eq!(status, 404);

    // A restart makes this replica the leader, which prunes at once: results older than a day
    // go, except the last up before the outage, its first down, its last down and the first
    // up after it (and the newest old one, which the next result could have made a change).
    central.restart().await?;
    let kept: Vec<String> = [4, 5, 7, 8, 11].iter().map(|&i| ids[i].clone()).collect();
    let expected: Vec<String> = kept.iter().chain(&ids[old.len()..]).cloned().collect();
    let pruned = eventually(
        std::time::Duration::from_secs(30),
        "old results pruned",
        || async {
            let left = central.result_ids(&monitor).await.ok()?;
            (left.len() <= expected.len()).then_some(left)
        },
    )
    .await?;
    assert_eq!(pruned, expected);
    // Minute buckets older than 48 h went too; hours and uptime are untouched.
    let (_, minutes) = central
        .admin(
            Method::GET,
            &history("minute", old_start - Duration::hours(1)),
            None,
        )
        .await?;
    let minute_totals: u64 = minutes["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["total"].as_u64().unwrap())
        .sum();
    assert_eq!(minute_totals, 11, "only the recent minutes: {minutes}");
    let (_, hours_after) = central
        .admin(
            Method::GET,
            &history("hour", old_start - Duration::hours(1)),
            None,
        )
        .await?;
    assert_eq!(hours_after, hours);
    assert_eq!(uptime(&central, &monitor).await?, before);
    central.stop().await;
    Ok(())
}

async fn uptime(central: &Central, monitor: &str) -> anyhow::Result<Value> {
    let path = format!("/api/v1/monitors/{monitor}/uptime");
    let (status, body) = central.admin(Method::GET, &path, None).await?;
    anyhow::ensure!(status == 200, "uptime: {status} {body}");
    Ok(body)
}
