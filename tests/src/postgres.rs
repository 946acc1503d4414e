//! A throwaway PostgreSQL server for tests on the PostgreSQL backend: `initdb` and `postgres`
//! from Debian's packages (`apt-get install postgresql`), run as the `postgres` user (initdb
//! refuses root), on a free loopback port with its socket and data in a temporary directory.
//! No system service is involved; the server is a child process and dies with its handle.
//!
//! Developers get the same server the e2e suite uses: `E2E_DATABASE=postgres cargo test -p e2e`.

use std::os::unix::fs::chown;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::process::{Child, Command};

/// Which database the e2e suite runs central on: `E2E_DATABASE=postgres` or SQLite (default).
pub fn suite_uses_postgres() -> bool {
    std::env::var("E2E_DATABASE").is_ok_and(|v| v.eq_ignore_ascii_case("postgres"))
}

pub struct Postgres {
    port: u16,
    bin: PathBuf,
    user: (u32, u32),
    _child: Child,
    _dir: tempfile::TempDir,
}

impl Postgres {
    /// Creates a cluster and starts its server; ready when this returns.
    pub async fn start() -> anyhow::Result<Postgres> {
        let bin = server_bin_dir()?;
        let user @ (uid, gid) = postgres_user().await?;
        let mut dir = tempfile::tempdir()?;
        chown(dir.path(), Some(uid), Some(gid)).context("handing the temp dir to postgres")?;
        let data = dir.path().join("data");
        let initdb = Command::new(bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .uid(uid)
            .gid(gid)
            .output()
            .await
            .context("running initdb")?;
        if !initdb.status.success() {
            bail!("initdb failed: {}", String::from_utf8_lossy(&initdb.stderr));
        }
        // A free port is only free until someone else binds it: parallel tests start servers
        // too. The server gets a cluster name of its own and is ready when its port answers
        // with that name; a server that lost the port says so in its log and exits, and is
        // started again on another. Any other failure is reported at once, with the log's end.
        let cluster = format!("e2e-{}", uuid::Uuid::new_v4().simple());
        let log_path = dir.path().join("postgres.log");
        let mut last_failure = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let log = std::fs::File::create(&log_path)?;
            chown(&log_path, Some(uid), Some(gid))?;
            let child = Command::new(bin.join("postgres"))
                .arg("-D")
                .arg(&data)
                .arg("-p")
                .arg(port.to_string())
                .arg("-k")
                .arg(dir.path())
                .arg("-c")
                .arg(format!("cluster_name={cluster}"))
                // Loopback only; durability is not what these tests measure.
                .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
                .args(["-c", "synchronous_commit=off", "-c", "max_connections=300"])
                // A benchmark's diagnosis, e.g. `shared_preload_libraries=pg_stat_statements
                // log_autovacuum_min_duration=0`: settings separated by spaces.
                .args(
                    std::env::var("E2E_POSTGRES_SETTINGS")
                        .unwrap_or_default()
                        .split_whitespace()
                        .flat_map(|setting| ["-c".to_string(), setting.to_string()]),
                )
                .uid(uid)
                .gid(gid)
                .stdout(Stdio::null())
                .stderr(log)
                .kill_on_drop(true)
                .spawn()
                .context("starting postgres")?;
            let mut server = Postgres {
                port,
                bin: bin.clone(),
                user,
                _child: child,
                _dir: dir,
            };
            let error = match server.until_ours(&cluster).await {
                Ok(()) => return Ok(server),
                Err(error) => error,
            };
            let _ = server._child.kill().await;
            dir = server._dir;
            // Each attempt starts a new log: keep this one's end before the next.
            let tail = log_tail(&log_path);
            last_failure = format!("{error:#}; the end of its postgres.log:\n{tail}");
            if !lost_its_port(&tail) {
                bail!("postgres did not start: {last_failure}");
            }
        }
        bail!("postgres lost its port 5 times; the last time: {last_failure}")
    }

    /// Waits until this server answers on its port, by its cluster name; fails if it exits
    /// first (its log tells why) or takes more than 30 s.
    async fn until_ours(&mut self, cluster: &str) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self._child.try_wait()? {
                bail!("postgres on port {} exited: {status}", self.port);
            }
            // Another server answering this port means ours cannot bind it: it will exit.
            if self
                .psql("SHOW cluster_name")
                .await
                .is_ok_and(|name| name == cluster)
            {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                bail!(
                    "timed out after 30 s waiting for postgres on port {}",
                    self.port
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Creates an empty database; returns its URL.
    pub async fn create_database(&self, name: &str) -> anyhow::Result<String> {
        self.psql(&format!("CREATE DATABASE \"{name}\"")).await?;
        Ok(self.url(name))
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// `pg_dump` of `database` in the custom format, into a file of the server's directory;
    /// returns its path (for `restore`).
    pub async fn dump(&self, database: &str, name: &str) -> anyhow::Result<PathBuf> {
        let file = self._dir.path().join(name);
        let output = Command::new(self.bin.join("pg_dump"))
            .args(["-h", "127.0.0.1", "-U", "postgres", "-Fc", "-f"])
            .arg(&file)
            .arg("-p")
            .arg(self.port.to_string())
            .arg(database)
            .uid(self.user.0)
            .gid(self.user.1)
            .output()
            .await?;
        if !output.status.success() {
            bail!("pg_dump: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(file)
    }

    /// Replaces `database` with the dump `file` (`dump`): dropped (its connections ended),
    /// created anew and restored with `pg_restore`, as an operator restores a backup.
    pub async fn restore(&self, database: &str, file: &Path) -> anyhow::Result<()> {
        self.psql(&format!("DROP DATABASE \"{database}\" WITH (FORCE)"))
            .await?;
        self.psql(&format!("CREATE DATABASE \"{database}\""))
            .await?;
        let output = Command::new(self.bin.join("pg_restore"))
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", database])
            .arg("-p")
            .arg(self.port.to_string())
            .arg(file)
            .uid(self.user.0)
            .gid(self.user.1)
            .output()
            .await?;
        if !output.status.success() {
            bail!("pg_restore: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(())
    }

    /// Runs one statement as the superuser.
    pub async fn psql(&self, sql: &str) -> anyhow::Result<String> {
        let output = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-tAc",
                sql,
            ])
            .arg("-p")
            .arg(self.port.to_string())
            // Whatever else may hold the port (a test's own listener) need not answer at all.
            .env("PGCONNECT_TIMEOUT", "5")
            .uid(self.user.0)
            .gid(self.user.1)
            .output()
            .await?;
        if !output.status.success() {
            bail!("psql `{sql}`: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    }
}

/// `/usr/lib/postgresql/<newest>/bin`.
fn server_bin_dir() -> anyhow::Result<PathBuf> {
    let root = Path::new("/usr/lib/postgresql");
    let newest = std::fs::read_dir(root)
        .with_context(|| format!("{} is missing: apt-get install postgresql", root.display()))?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .max()
        .context("no PostgreSQL version under /usr/lib/postgresql")?;
    Ok(root.join(newest.to_string()).join("bin"))
}

async fn postgres_user() -> anyhow::Result<(u32, u32)> {
    let id = |flag: &'static str| async move {
        let output = Command::new("id").args([flag, "postgres"]).output().await?;
        anyhow::ensure!(
            output.status.success(),
            "no `postgres` user (apt-get install postgresql)"
        );
        Ok::<u32, anyhow::Error>(String::from_utf8_lossy(&output.stdout).trim().parse()?)
    };
    Ok((id("-u").await?, id("-g").await?))
}

/// The last 20 lines of a server's log (or why it could not be read).
fn log_tail(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(log) => {
            let lines: Vec<&str> = log.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        }
        Err(e) => format!("<unreadable: {e}>"),
    }
}

/// Whether a server's log says it could not listen on its port because another had it.
fn lost_its_port(log: &str) -> bool {
    [
        "could not bind",
        "Address already in use",
        "could not create any TCP/IP sockets",
    ]
    .iter()
    .any(|sign| log.contains(sign))
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
