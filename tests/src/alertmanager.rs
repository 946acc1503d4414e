//! A real Alertmanager (Debian's `prometheus-alertmanager`), started in the foreground with a
//! configuration the test writes, on a free loopback port, without clustering. Its
//! `resolve_timeout` is short, so an alert that is not sent again ends quickly.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;
use tokio::process::{Child, Command};

use crate::eventually;
use crate::postgres::free_port;

pub struct Alertmanager {
    /// `http://127.0.0.1:<port>`: the base URL, as an operator gives it to a channel.
    pub url: String,
    http: reqwest::Client,
    _child: Child,
    _dir: tempfile::TempDir,
}

impl Alertmanager {
    pub async fn start(resolve_timeout: Duration) -> anyhow::Result<Alertmanager> {
        let binary = [
            "/usr/bin/prometheus-alertmanager",
            "/usr/sbin/prometheus-alertmanager",
        ]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .context("Alertmanager is not installed: apt-get install prometheus-alertmanager")?;
        let dir = tempfile::tempdir()?;
        let port = free_port()?;
        let config = format!(
            "global:\n  resolve_timeout: {}s\n\
             route:\n  receiver: nobody\n  group_wait: 1s\n\
             receivers:\n  - name: nobody\n",
            resolve_timeout.as_secs().max(1)
        );
        let path = dir.path().join("alertmanager.yml");
        std::fs::write(&path, config)?;
        let log = std::fs::File::create(dir.path().join("alertmanager.log"))?;
        let child = Command::new(binary)
            .arg(format!("--config.file={}", path.display()))
            .arg(format!(
                "--storage.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("starting alertmanager")?;
        let manager = Alertmanager {
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            _child: child,
            _dir: dir,
        };
        eventually(Duration::from_secs(20), "alertmanager ready", || async {
            let answer = manager
                .http
                .get(format!("{}/-/ready", manager.url))
                .send()
                .await
                .ok()?;
            answer.status().is_success().then_some(())
        })
        .await?;
        Ok(manager)
    }

    /// The alerts Alertmanager holds as not ended (`GET /api/v2/alerts`).
    pub async fn alerts(&self) -> anyhow::Result<Vec<Value>> {
        let answer: Value = self
            .http
            .get(format!("{}/api/v2/alerts", self.url))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(answer.as_array().cloned().unwrap_or_default())
    }

    /// The one alert named `alertname` about `label = value`, if Alertmanager holds it.
    pub async fn alert(
        &self,
        alertname: &str,
        label: &str,
        value: &str,
    ) -> anyhow::Result<Option<Value>> {
        Ok(self
            .alerts()
            .await?
            .into_iter()
            .find(|a| a["labels"]["alertname"] == alertname && a["labels"][label] == value))
    }
}
