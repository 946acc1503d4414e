//! Reading a health document (see docs/health-json.md): each dependency's name, health,
//! latency, skipped flag and error. Skipped dependencies are reported but never fail the check.
//! Owns: the document's interpretation. Must not: fetch anything.

use serde_json::{json, Value};

pub struct HealthReport {
    pub dependencies: Value,
    pub failure: Option<String>,
}

pub fn health_json(document: &Value) -> HealthReport {
    let Some(list) = document.get("dependencies").and_then(Value::as_array) else {
        return HealthReport {
            dependencies: json!([]),
            failure: Some("health document has no `dependencies` list".into()),
        };
    };
    let mut failures = Vec::new();
    let dependencies: Vec<Value> = list
        .iter()
        .map(|dep| {
            let name = dep
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("unnamed")
                .to_string();
            let skipped = dep.get("skipped").and_then(Value::as_bool).unwrap_or(false);
            let healthy = dep.get("healthy").and_then(Value::as_bool).unwrap_or(false);
            let error = dep.get("error").and_then(Value::as_str).map(str::to_string);
            if !skipped && !healthy {
                failures.push(match &error {
                    Some(error) => format!("{name} ({error})"),
                    None => name.clone(),
                });
            }
            json!({
                "name": name,
                "healthy": healthy,
                "skipped": skipped,
                "latency_ms": dep.get("latency_ms").cloned().unwrap_or(Value::Null),
                "error": error,
            })
        })
        .collect();
    let failure =
        (!failures.is_empty()).then(|| format!("unhealthy dependencies: {}", failures.join(", ")));
    HealthReport {
        dependencies: Value::Array(dependencies),
        failure,
    }
}
