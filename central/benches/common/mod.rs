//! Setup shared by central's benchmarks: a fresh database (a SQLite file, or a new database on
//! the PostgreSQL server named by `--database-url`), central replicas serving it in this
//! process, and pollers registered through the real poller API. Each benchmark uses a part.
#![allow(dead_code)]

use std::time::Duration;

use central::config::ServeArgs;
use serde_json::{json, Value};
use shared_proto::settings_api::CreateRegistrationToken;
use sqlx::Connection;

pub const ADMIN_TOKEN: &str = "bench-admin-5e8a1c7f3b9d2e6a4c0f8b1d";

/// A database for one run; a SQLite file lives as long as this.
pub struct Database {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl Database {
    pub fn is_postgres(&self) -> bool {
        self.url.starts_with("postgres")
    }
}

/// A new SQLite file, or a new database on the server of `server_url` (`postgres://…/any`).
pub async fn fresh_database(server_url: Option<&str>) -> Database {
    match server_url {
        None => {
            let dir = tempfile::tempdir().expect("tempdir");
            Database {
                url: format!("sqlite://{}", dir.path().join("central.db").display()),
                _dir: Some(dir),
            }
        }
        Some(url) => {
            let mut conn = sqlx::PgConnection::connect(url)
                .await
                .expect("connecting to --database-url");
            let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&mut conn)
                .await
                .expect("create database");
            let mut parsed = url::Url::parse(url).expect("--database-url");
            parsed.set_path(&name);
            Database {
                url: parsed.to_string(),
                _dir: None,
            }
        }
    }
}

/// `replicas` centrals on one database, each on its own port (started one after the other).
pub async fn start_replicas(database: &Database, replicas: usize) -> Vec<central::Running> {
    let mut running = Vec::new();
    for _ in 0..replicas.max(1) {
        running.push(
            central::start(ServeArgs {
                listen: "127.0.0.1:0".into(),
                database_url: database.url.clone(),
                admin_token: Some(ADMIN_TOKEN.into()),
                offline_after: Duration::from_secs(3600),
                failback_settle: Duration::from_secs(0),
                // Hundreds of simulated agents register from one address.
                auth_rate_limit: 0.0,
                max_long_polls: 100_000,
                ..ServeArgs::defaults()
            })
            .await
            .expect("central"),
        );
    }
    running
}

/// A registered poller: id and access token.
pub struct Poller {
    pub id: String,
    pub access: String,
}

/// Registers `count` pollers through `base`'s poller API, `concurrency` at a time (each
/// registration verifies an argon2 hash).
pub async fn register_pollers(
    app: &central::service::App,
    base: &str,
    count: usize,
    concurrency: usize,
) -> Vec<Poller> {
    let token = app
        .registration_tokens()
        .create_registration_token(CreateRegistrationToken {
            name: "bench".into(),
            expires_in: None,
            max_uses: Some(count.max(1) as u32),
            region: None,
            capabilities: None,
        })
        .await
        .expect("token")
        .token
        .expect("secret");
    let http = reqwest::Client::new();
    let mut pollers = Vec::with_capacity(count);
    let indexes: Vec<usize> = (0..count).collect();
    for chunk in indexes.chunks(concurrency.max(1)) {
        let tasks: Vec<_> = chunk
            .iter()
            .map(|i| {
                let (http, url, token) = (
                    http.clone(),
                    format!("{base}/api/poller/register"),
                    token.clone(),
                );
                let name = format!("bench-{i}");
                tokio::spawn(async move {
                    let answer: Value = http
                        .post(url)
                        .json(&json!({"registration_token": token, "name": name,
                                      "capabilities": ["http"], "version": "bench"}))
                        .send()
                        .await
                        .expect("register")
                        .json()
                        .await
                        .expect("register answer");
                    Poller {
                        id: answer["poller_id"].as_str().expect("poller_id").to_string(),
                        access: answer["access_token"].as_str().expect("token").to_string(),
                    }
                })
            })
            .collect();
        for task in tasks {
            pollers.push(task.await.expect("registration task"));
        }
    }
    pollers
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted
        .get(((sorted.len().max(1) - 1) as f64 * p) as usize)
        .copied()
        .unwrap_or_default()
}

pub fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

impl Database {
    /// A database that someone else created (and keeps).
    pub fn existing(url: &str) -> Database {
        Database {
            url: url.to_string(),
            _dir: None,
        }
    }
}
