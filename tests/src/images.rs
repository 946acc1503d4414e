//! The deploy images, built and run with podman (issue 70): Debian's podman runs containers
//! here, as root, where no Docker engine does.
//!
//! The images cannot be pulled, so their base is made from Debian's packages: `debootstrap`
//! (bookworm, the images' `debian:bookworm-slim`, with `ca-certificates` and `curl`, which
//! their run stage installs) imported once as `BASE` and kept in podman's store. What is built
//! is each Dockerfile's **run stage**, verbatim but for two lines: its `FROM` names `BASE`, and
//! its `COPY --from=build` takes the binary the tests built (debug, for the host's bookworm
//! glibc) instead of compiling it again in a build stage, which would cost CI a second
//! compile of the workspace. So the user, environment, volume, health check, labels and
//! entry point under test are the shipped ones.
//!
//! Containers get explicit limits (`LIMITS`, given as the default of every container, the
//! pod's own included, through a `containers.conf` of the tests' own): podman's defaults
//! exceed what this machine lets a process set.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{bail, Context};

/// The base image made from Debian's packages (in place of `debian:bookworm-slim`).
pub const BASE: &str = "localhost/e2e-bookworm-base:latest";
/// The limits every container and build step runs with.
const LIMITS: &str =
    "[containers]\ndefault_ulimits = [\"nofile=4096:4096\", \"nproc=4096:4096\"]\n";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// podman, configured with `LIMITS`.
fn podman_command() -> anyhow::Result<tokio::process::Command> {
    let conf = repo_root().join("target/images/containers.conf");
    if std::fs::read_to_string(&conf).ok().as_deref() != Some(LIMITS) {
        std::fs::create_dir_all(conf.parent().context("target/images")?)?;
        std::fs::write(&conf, LIMITS)?;
    }
    let mut command = tokio::process::Command::new("podman");
    command.env("CONTAINERS_CONF", conf);
    Ok(command)
}

/// Runs podman with `args`; its standard output, trimmed. Fails with its standard error.
pub async fn podman(args: &[&str]) -> anyhow::Result<String> {
    let output = podman_command()?
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .context("running podman (scripts/test.sh installs it)")?;
    if !output.status.success() {
        bail!(
            "podman {}: {}\n{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Makes `BASE` unless podman has it: debootstrap into `target/images/`, then import.
pub async fn ensure_base() -> anyhow::Result<()> {
    if podman(&["image", "exists", BASE]).await.is_ok() {
        return Ok(());
    }
    let rootfs = repo_root().join("target/images/bookworm-rootfs");
    if !rootfs.join("usr/bin/curl").is_file() {
        let _ = std::fs::remove_dir_all(&rootfs);
        std::fs::create_dir_all(&rootfs)?;
        let status = tokio::process::Command::new("debootstrap")
            .args([
                "--variant=minbase",
                "--include=ca-certificates,curl",
                "bookworm",
            ])
            .arg(&rootfs)
            .arg("http://deb.debian.org/debian")
            .stdout(Stdio::null())
            .status()
            .await
            .context("running debootstrap (scripts/test.sh installs it)")?;
        anyhow::ensure!(status.success(), "debootstrap failed: {status}");
    }
    let tar = tokio::process::Command::new("tar")
        .arg("-C")
        .arg(&rootfs)
        .args(["-c", "."])
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout: Stdio = tar
        .stdout
        .context("tar's output")?
        .try_into()
        .context("tar's output as a pipe")?;
    let status = podman_command()?
        .args(["import", "-", BASE])
        .stdin(stdout)
        .stdout(Stdio::null())
        .status()
        .await?;
    anyhow::ensure!(status.success(), "podman import failed: {status}");
    Ok(())
}

/// The run stage of `dockerfile` (the text from its `# ---- run` line), on `BASE`, with the
/// binary `binary` copied in from the build context.
pub fn run_stage(dockerfile: &str, binary: &str) -> anyhow::Result<String> {
    let start = dockerfile
        .find("# ---- run")
        .context("the Dockerfile has no `# ---- run` stage")?;
    let stage = &dockerfile[start..];
    let from = "FROM debian:bookworm-slim";
    let copy = format!("COPY --from=build /usr/local/bin/{binary} /usr/local/bin/{binary}");
    anyhow::ensure!(
        stage.matches(from).count() == 1 && stage.matches(copy.as_str()).count() == 1,
        "the run stage no longer reads `{from}` and `{copy}` once each: update images.rs"
    );
    Ok(stage
        .replace(from, &format!("FROM {BASE}"))
        .replace(&copy, &format!("COPY {binary} /usr/local/bin/{binary}")))
}

/// Builds `tag` from the run stage of `dockerfile` with the executable at `binary_path`.
pub async fn build(tag: &str, dockerfile: &str, binary_path: &Path) -> anyhow::Result<()> {
    let name = binary_path
        .file_name()
        .and_then(|n| n.to_str())
        .context("binary name")?;
    let context = tempfile::tempdir()?;
    std::fs::copy(binary_path, context.path().join(name))
        .with_context(|| format!("copying {}", binary_path.display()))?;
    let containerfile = context.path().join("Containerfile");
    std::fs::write(&containerfile, run_stage(dockerfile, name)?)?;
    let mut args = vec!["build", "--quiet"];
    let file = containerfile.to_string_lossy().to_string();
    let dir = context.path().to_string_lossy().to_string();
    args.extend(["-f", &file, "-t", tag, &dir]);
    podman(&args).await?;
    Ok(())
}

/// A label of an image.
pub async fn label(image: &str, name: &str) -> anyhow::Result<String> {
    podman(&[
        "image",
        "inspect",
        "--format",
        &format!("{{{{index .Labels \"{name}\"}}}}"),
        image,
    ])
    .await
}

/// A pod (one network namespace, as a compose project's containers reach one another) with
/// its containers and named volumes, all removed when dropped.
pub struct Pod {
    pub name: String,
    volumes: Vec<String>,
    images: Vec<String>,
}

impl Pod {
    /// A pod publishing its port 8080 (central's, as the compose file does) on
    /// `127.0.0.1:host_port`, with `sysctls` for its namespace.
    pub async fn create(name: &str, host_port: u16, sysctls: &[&str]) -> anyhow::Result<Pod> {
        let _ = podman(&["pod", "rm", "-f", "-t", "0", name]).await;
        let publish = format!("127.0.0.1:{host_port}:8080");
        let mut args = vec!["pod", "create", "--name", name, "-p", &publish];
        for sysctl in sysctls {
            args.extend(["--sysctl", sysctl]);
        }
        podman(&args).await?;
        Ok(Pod {
            name: name.to_string(),
            volumes: Vec::new(),
            images: Vec::new(),
        })
    }

    /// Runs `image` detached in the pod as `name`, its `/data` on the named volume
    /// `<pod>-<name>`, with `env`.
    pub async fn run(
        &mut self,
        name: &str,
        image: &str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<()> {
        let volume = format!("{}-{name}", self.name);
        if !self.volumes.contains(&volume) {
            self.volumes.push(volume.clone());
        }
        let container = self.container(name);
        let mount = format!("{volume}:/data");
        let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args = vec![
            "run", "-d", "--pod", &self.name, "--name", &container, "-v", &mount,
        ];
        for pair in &env {
            args.extend(["-e", pair]);
        }
        args.push(image);
        podman(&args).await?;
        Ok(())
    }

    /// Removes `image` with the pod.
    pub fn owns_image(&mut self, image: &str) {
        self.images.push(image.to_string());
    }

    /// The container's name in podman.
    pub fn container(&self, name: &str) -> String {
        format!("{}-{name}", self.name)
    }

    /// The container's log (standard output and error).
    pub async fn logs(&self, name: &str) -> String {
        let container = self.container(name);
        let output = match podman_command() {
            Ok(mut command) => command.args(["logs", &container]).output().await,
            Err(e) => return format!("no log: {e}"),
        };
        match output {
            Ok(o) => format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => format!("no log: {e}"),
        }
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let run = |args: &[&str]| {
            let _ = std::process::Command::new("podman")
                .env(
                    "CONTAINERS_CONF",
                    repo_root().join("target/images/containers.conf"),
                )
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        };
        run(&["pod", "rm", "-f", "-t", "0", &self.name]);
        for volume in &self.volumes {
            run(&["volume", "rm", "-f", volume]);
        }
        for image in &self.images {
            run(&["rmi", "-f", image]);
        }
    }
}
