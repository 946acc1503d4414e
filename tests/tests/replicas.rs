//! Several central replicas on one PostgreSQL database. These need PostgreSQL, so they are
//! ignored in the default (SQLite) run; `.ci/run` runs them with
//! `E2E_DATABASE=postgres cargo test -p e2e -- --include-ignored`.

use std::time::{Duration, Instant};

use e2e::postgres::Postgres;
use e2e::{eventually, Central};
use reqwest::Method;
use serde_json::{json, Value};

const LEADING: &str = "this replica now runs the once-only duties";

/// Registers a poller through `central` and sends one heartbeat; returns its id.
async fn poller_that_falls_silent(central: &Central, name: &str) -> anyhow::Result<String> {
    let poller = central.register_poller(name).await?;
    let status = reqwest::Client::new()
        .post(format!("{}/api/poller/heartbeat", central.url))
        .bearer_auth(&poller.access)
        .json(&json!({"version": "test"}))
        .send()
        .await?
        .status();
    anyhow::ensure!(status == 200, "heartbeat: {status}");
    Ok(poller.id)
}

/// The statuses recorded for a poller, oldest first.
async fn recorded(central: &Central, poller_id: &str) -> anyhow::Result<Vec<String>> {
    let (_, changes) = central
        .admin(
            Method::GET,
            &format!("/api/v1/pollers/{poller_id}/status-changes"),
            None,
        )
        .await?;
    Ok(changes["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|c| c["status"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default())
}

fn offline_records(statuses: &[String]) -> usize {
    statuses.iter().filter(|s| *s == "offline").count()
}

fn leads(central: &Central) -> bool {
    central.log().contains(LEADING)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: E2E_DATABASE=postgres cargo test -p e2e -- --include-ignored"]
async fn one_replica_runs_the_duties_and_another_takes_over_when_it_is_killed() -> anyhow::Result<()>
{
    let server = Postgres::start().await?;
    let url = server.create_database("central").await?;
    let env = [("CENTRAL_OFFLINE_AFTER", "3s")];
    let mut first = Central::start_replica(&url, &env).await?;
    eventually(Duration::from_secs(10), "a leader", || async {
        leads(&first).then_some(())
    })
    .await?;
    let second = Central::start_replica(&url, &env).await?;

    // Both serve; only one runs the liveness sweep, and a silent poller is recorded offline
    // once, not once per replica.
    let quiet = poller_that_falls_silent(&second, "quiet").await?;
    let quiet_statuses = eventually(
        Duration::from_secs(20),
        "quiet recorded offline",
        || async {
            let statuses = recorded(&first, &quiet).await.ok()?;
            statuses
                .contains(&"offline".to_string())
                .then_some(statuses)
        },
    )
    .await?;
    // Give the other replica time to (wrongly) sweep too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let quiet_statuses_later = recorded(&first, &quiet).await?;
    assert_eq!(
        quiet_statuses_later, quiet_statuses,
        "one record per change"
    );
    assert_eq!(offline_records(&quiet_statuses), 1, "{quiet_statuses:?}");
    assert!(
        !leads(&second),
        "the second replica must not lead while the first lives"
    );

    // kill -9 of the leader: the other replica takes the duties within the lease time, and a
    // poller that falls silent afterwards is still noticed.
    first.kill().await;
    let killed = Instant::now();
    eventually(Duration::from_secs(30), "the survivor leads", || async {
        leads(&second).then_some(())
    })
    .await?;
    println!(
        "replicas: the survivor took the duties after {:?}",
        killed.elapsed()
    );
    let late = poller_that_falls_silent(&second, "late").await?;
    let statuses = eventually(Duration::from_secs(30), "late recorded offline", || async {
        let statuses = recorded(&second, &late).await.ok()?;
        statuses
            .contains(&"offline".to_string())
            .then_some(statuses)
    })
    .await?;
    assert_eq!(offline_records(&statuses), 1, "{statuses:?}");
    let quiet_after = recorded(&second, &quiet).await?;
    assert_eq!(
        quiet_after, quiet_statuses,
        "the new leader records nothing twice"
    );

    let pollers: Value = second.admin(Method::GET, "/api/v1/pollers", None).await?.1;
    assert_eq!(pollers["items"].as_array().map(Vec::len), Some(2));
    drop(server);
    Ok(())
}
