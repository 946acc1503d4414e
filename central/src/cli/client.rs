//! The settings API as `central apply` and `export` use it: a bearer credential (an API key or
//! the admin token), JSON in and out, every page of a list, and the server's own error message
//! when it refuses.

use anyhow::Context;
use reqwest::Method;
use serde_json::Value;

pub struct Client {
    http: reqwest::Client,
    base: String,
    credential: String,
}

impl Client {
    pub fn new(server: &str, credential: &str) -> anyhow::Result<Client> {
        Ok(Client {
            http: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(60))
                .build()?,
            base: format!("{}/api/v1", server.trim_end_matches('/')),
            credential: credential.to_string(),
        })
    }

    /// One call; `Ok(None)` for `404` (the caller decides what missing means).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Option<Value>> {
        let url = format!("{}{path}", self.base);
        let mut request = self
            .http
            .request(method.clone(), &url)
            .bearer_auth(&self.credential);
        if let Some(body) = body {
            request = request.json(body);
        }
        let answer = request
            .send()
            .await
            .with_context(|| format!("{method} {url}"))?;
        let status = answer.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let text = answer.text().await.unwrap_or_default();
        if !status.is_success() {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or(text);
            anyhow::bail!("{method} {path}: {status}: {message}");
        }
        if text.is_empty() {
            return Ok(Some(Value::Null));
        }
        Ok(Some(serde_json::from_str(&text).with_context(|| {
            format!("{method} {path}: the answer is not JSON")
        })?))
    }

    /// `call` for a change that must succeed.
    pub async fn change(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        self.call(method.clone(), path, body)
            .await?
            .with_context(|| format!("{method} {path}: not found"))
    }

    /// Every item of a paged list (`{items, next_cursor}`).
    pub async fn all(&self, path: &str) -> anyhow::Result<Vec<Value>> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page_path = match &cursor {
                Some(c) => format!("{path}?limit=1000&cursor={c}"),
                None => format!("{path}?limit=1000"),
            };
            let page = self.change(Method::GET, &page_path, None).await?;
            if let Some(list) = page["items"].as_array() {
                items.extend(list.iter().cloned());
            }
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return Ok(items),
            }
        }
    }
}
