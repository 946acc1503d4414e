//! A real reverse proxy in front of central replicas: HAProxy from Debian's packages
//! (`apt-get install haproxy`), started in the foreground with a configuration the test writes,
//! on a free loopback port. It health-checks each replica on `/readyz` and retries a refused
//! connection on another replica, as a production setup would.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::process::{Child, Command};

use crate::eventually;
use crate::postgres::free_port;

pub struct LoadBalancer {
    /// `http://127.0.0.1:<port>`: give this to agents and clients.
    pub url: String,
    _child: Child,
    _dir: tempfile::TempDir,
}

impl LoadBalancer {
    /// Starts HAProxy balancing over `backends` (`host:port` each); ready when this returns.
    pub async fn haproxy(backends: &[&str]) -> anyhow::Result<LoadBalancer> {
        let binary = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .context("HAProxy is not installed: apt-get install haproxy")?;
        let dir = tempfile::tempdir()?;
        let port = free_port()?;
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, address)| format!("    server replica{i} {address} check\n"))
            .collect();
        // Long polls hold a request up to 60 s: the server timeout must outlast them. No reuse
        // of idle server connections: a request sent on one to a replica that just died gets a
        // 502 (HAProxy retries only failed connects), one on a new connection is redispatched.
        let config = format!(
            "global\n    maxconn 2000\n\
             defaults\n    mode http\n    timeout connect 1s\n    timeout client 90s\n\
             \x20   timeout server 90s\n    retries 3\n    option redispatch\n    option forwardfor\n\
             \x20   http-reuse never\n\
             frontend central\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\
             backend replicas\n    balance roundrobin\n    option httpchk GET /readyz\n\
             \x20   default-server inter 500ms fall 2 rise 2\n{servers}"
        );
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config)?;
        let log = std::fs::File::create(dir.path().join("haproxy.log"))?;
        let child = Command::new(binary)
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("starting haproxy")?;
        let balancer = LoadBalancer {
            url: format!("http://127.0.0.1:{port}"),
            _child: child,
            _dir: dir,
        };
        let http = reqwest::Client::new();
        eventually(Duration::from_secs(20), "haproxy serving", || async {
            let answer = http
                .get(format!("{}/readyz", balancer.url))
                .send()
                .await
                .ok()?;
            answer.status().is_success().then_some(())
        })
        .await?;
        Ok(balancer)
    }
}
