//! The shape of central's code, checked on every run so that it cannot drift back unnoticed
//! (issue 69; `../shared/tools/shape` prints the same figures). Lines that are met are held;
//! figures still above their line are ratchets: they may fall, never rise. Top-level modules
//! of central import one another one way only (no cycle); only the HTTP boundary (`api`,
//! `web`, `server`, `error.rs`) names the HTTP error type; neither the CLI nor delivery
//! (`notify`) reaches services or store. Lower a ratchet when the work lowers the figure. Test code (from a
//! `#[cfg(test)]` line on) is not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Figures met: held at their line.
const LARGEST_FILE_LINES: usize = 600;
const APP_FIELDS: usize = 12;
/// Met since the store names its differences in `store/dialect.rs` (83 branches before, 2
/// left: the choice of migration set). Counted up to a file's first `#[cfg(test)]`.
const BACKEND_BRANCHES_OUTSIDE_THE_DIALECT: usize = 10;
/// Met since ingest's SQLite connection is its own (`store::direct`), not a handle borrowed
/// from sqlx through FFI (2 blocks before).
const UNSAFE_BLOCKS: usize = 0;
/// A ratchet: the public functions of `impl App` blocks (164 before services began moving out
/// of `App` into structs of their own; each such service adds one, its constructor). It may
/// fall, never rise: a new operation goes on its concept's service.
const APP_PUBLIC_FUNCTIONS: usize = 125;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`, with its code lines (up to its first `#[cfg(test)]`).
fn sources(dir: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text
                    .lines()
                    .take_while(|l| !l.trim_start().starts_with("#[cfg(test)]"))
                    .map(str::to_string)
                    .collect();
                found.push((path, code));
            }
        }
    }
    found
}

fn count(lines: &[String], pattern: &str) -> usize {
    lines.iter().map(|l| l.matches(pattern).count()).sum()
}

#[test]
fn central_keeps_its_shape() {
    let central = sources(&root().join("central/src"));
    let mut over = Vec::new();

    for (path, code) in &central {
        if code.len() > LARGEST_FILE_LINES {
            over.push(format!(
                "{} has {} code lines (at most {LARGEST_FILE_LINES}): split it by concern",
                path.display(),
                code.len()
            ));
        }
    }

    let (_, service) = central
        .iter()
        .find(|(p, _)| p.ends_with("service/mod.rs"))
        .expect("service/mod.rs");
    let start = service
        .iter()
        .position(|l| l.starts_with("pub struct App {"))
        .expect("App");
    let fields = service[start + 1..]
        .iter()
        .take_while(|l| !l.starts_with('}'))
        .filter(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            !l.starts_with("//")
                && l.split_once(':').is_some_and(|(name, _)| {
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                })
        })
        .count();
    if fields > APP_FIELDS {
        over.push(format!("App has {fields} fields (at most {APP_FIELDS})"));
    }

    let dialect = |p: &Path| {
        let p = p.to_string_lossy();
        p.ends_with("store/dialect.rs")
            || p.contains("store/sqlite/")
            || p.contains("store/postgres/")
    };
    let branches: usize = central
        .iter()
        .filter(|(p, _)| !dialect(p))
        .map(|(_, code)| count(code, "Backend::Sqlite") + count(code, "Backend::Postgres"))
        .sum();
    if branches > BACKEND_BRANCHES_OUTSIDE_THE_DIALECT {
        over.push(format!(
            "{branches} Backend::Sqlite/Postgres branches outside the store's dialect \
             (at most {BACKEND_BRANCHES_OUTSIDE_THE_DIALECT}): put the difference in the dialect"
        ));
    }
    let unsafe_blocks: usize = central
        .iter()
        .map(|(_, code)| code.iter().filter(|l| l.contains("unsafe {")).count())
        .sum();
    if unsafe_blocks > UNSAFE_BLOCKS {
        over.push(format!(
            "{unsafe_blocks} unsafe blocks (at most {UNSAFE_BLOCKS})"
        ));
    }

    // The HTTP error type is the HTTP boundary's: services, duties and the rest fail with
    // `ServiceError` (or `anyhow`), which `error.rs` maps once.
    let http_errors_below: Vec<String> = central
        .iter()
        .filter(|(p, code)| {
            let p = p.to_string_lossy();
            let boundary = [
                "central/src/api/",
                "central/src/web/",
                "central/src/server/",
            ]
            .iter()
            .any(|b| p.contains(b))
                || p.ends_with("central/src/error.rs");
            !boundary
                && code
                    .iter()
                    .any(|l| l.contains("crate::error") || l.contains("ApiError"))
        })
        .map(|(p, _)| p.display().to_string())
        .collect();
    if !http_errors_below.is_empty() {
        over.push(format!(
            "{http_errors_below:?} name the HTTP error type below the HTTP boundary: fail with \
             service::error::ServiceError"
        ));
    }

    // `central apply` and `export` are clients of the settings API, and delivery (`notify`)
    // is handed a domain channel and a message: neither reaches services or store.
    for (dir, why) in [
        ("central/src/cli/", "the CLI: share it through shared-proto"),
        ("central/src/notify/", "delivery: hand it domain types"),
    ] {
        let reaching_in: Vec<String> = central
            .iter()
            .filter(|(p, code)| {
                p.to_string_lossy().contains(dir)
                    && code
                        .iter()
                        .any(|l| l.contains("crate::service") || l.contains("crate::store"))
            })
            .map(|(p, _)| p.display().to_string())
            .collect();
        if !reaching_in.is_empty() {
            over.push(format!(
                "{reaching_in:?} reach the server's services or store from {why}"
            ));
        }
    }

    let app_functions: usize = central
        .iter()
        .map(|(_, code)| {
            let mut inside = false;
            code.iter()
                .filter(|l| {
                    if l.starts_with("impl App {") {
                        inside = true;
                    } else if inside && l.starts_with('}') {
                        inside = false;
                    }
                    let l = l.trim_start_matches("    ");
                    inside
                        && (l.starts_with("pub fn ")
                            || l.starts_with("pub async fn ")
                            || l.starts_with("pub(crate) fn ")
                            || l.starts_with("pub(crate) async fn ")
                            || l.starts_with("pub(super) fn ")
                            || l.starts_with("pub(super) async fn "))
                })
                .count()
        })
        .sum();
    if app_functions > APP_PUBLIC_FUNCTIONS {
        over.push(format!(
            "impl App has {app_functions} public functions (at most {APP_PUBLIC_FUNCTIONS}): \
             put the operation on its concept's service"
        ));
    }

    if let Some(cycle) = import_cycle(&root().join("central/src"), &central) {
        over.push(format!(
            "central's top-level modules import one another in a circle: {}",
            cycle.join(" -> ")
        ));
    }

    let loose_tests: Vec<String> = std::fs::read_dir(root().join("tests/tests"))
        .unwrap()
        .filter_map(|e| {
            let path = e.ok()?.path();
            path.extension()
                .is_some_and(|e| e == "rs")
                .then(|| path.display().to_string())
        })
        .collect();
    if !loose_tests.is_empty() {
        over.push(format!(
            "{loose_tests:?} would each be a test binary linking central: make them modules of \
             tests/tests/e2e/"
        ));
    }

    assert!(
        over.is_empty(),
        "central's shape slipped:\n{}",
        over.join("\n")
    );
}

/// A circle of imports (`crate::x` named in module `y`'s code) between central's top-level
/// modules, if there is one: the first found by a depth-first walk.
fn import_cycle(src: &Path, central: &[(PathBuf, Vec<String>)]) -> Option<Vec<String>> {
    let top = |path: &Path| -> String {
        let first = path.strip_prefix(src).unwrap().components().next().unwrap();
        let name = first.as_os_str().to_string_lossy();
        name.strip_suffix(".rs").unwrap_or(&name).to_string()
    };
    let modules: BTreeSet<String> = central
        .iter()
        .map(|(p, _)| top(p))
        .filter(|m| m != "main" && m != "lib")
        .collect();
    let mut imports: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, code) in central {
        let from = top(path);
        if !modules.contains(&from) {
            continue;
        }
        for line in code {
            for (at, _) in line.match_indices("crate::") {
                let name: String = line[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if name != from && modules.contains(&name) {
                    imports.entry(from.clone()).or_default().insert(name);
                }
            }
        }
    }
    // Depth-first, with the path walked so far: meeting a module on it closes a circle.
    fn walk(
        at: &str,
        imports: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|m| m == at) {
            let mut cycle = path[start..].to_vec();
            cycle.push(at.to_string());
            return Some(cycle);
        }
        if !done.insert(at.to_string()) {
            return None;
        }
        path.push(at.to_string());
        for next in imports.get(at).into_iter().flatten() {
            if let Some(cycle) = walk(next, imports, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    modules
        .iter()
        .find_map(|m| walk(m, &imports, &mut Vec::new(), &mut done))
}
