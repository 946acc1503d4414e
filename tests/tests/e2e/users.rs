//! Users, roles and API keys with the real binary: each role can do exactly what it allows
//! through the settings API, a key never exceeds its owner, and a revoked key, a demoted owner
//! or a removed one takes effect on the very next call.

use e2e::Central;
use reqwest::Method;
use serde_json::{json, Value};

const STRONG: &str = "correct horse battery staple";

async fn user(central: &Central, name: &str, role: &str) -> anyhow::Result<String> {
    let email = format!("{}@example.com", name.to_lowercase());
    let (status, body) = central
        .admin(
            Method::POST,
            "/api/v1/users",
            Some(json!({"name": name, "email": email, "role": role, "password": STRONG})),
        )
        .await?;
    anyhow::ensure!(status == 201, "adding {name}: {status} {body}");
    anyhow::ensure!(body.get("password").is_none() && body.get("password_hash").is_none());
    Ok(body["id"].as_str().unwrap_or_default().to_string())
}

/// Makes a key with `bearer`; returns (status, body).
async fn make_key(central: &Central, bearer: &str, body: Value) -> anyhow::Result<(u16, Value)> {
    central
        .call(bearer, Method::POST, "/api/v1/api-keys", Some(body))
        .await
}

fn key_of(body: &Value) -> String {
    body["token"].as_str().unwrap_or_default().to_string()
}

/// The secret after a key's id (`pkey_<id>_<secret>`).
fn secret_part(key: &str) -> &str {
    key.rsplit('_').next().unwrap_or(key)
}

fn monitor(name: &str) -> Value {
    json!({"name": name, "kind": "http", "target": "http://127.0.0.1:9/", "interval_ms": 60000})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_does_what_it_allows_and_a_key_never_exceeds_its_owner() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let ana = user(&central, "Ana", "admin").await?;
    let ed = user(&central, "Ed", "editor").await?;
    let vic = user(&central, "Vic", "viewer").await?;

    // Passwords are judged: an easy one is refused, naming the field.
    let (status, body) = central
        .admin(
            Method::POST,
            "/api/v1/users",
            Some(
                json!({"name": "Weak", "email": "weak@example.com", "role": "viewer",
                        "password": "password1234"}),
            ),
        )
        .await?;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"], "invalid_value");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("password"),
        "{body}"
    );
    // Emails are unique whatever their case.
    let (status, _) = central
        .admin(
            Method::POST,
            "/api/v1/users",
            Some(json!({"name": "Ed 2", "email": "ED@example.com", "role": "viewer"})),
        )
        .await?;
    assert_eq!(status, 409);

    // The admin token makes each user a key; none above the user's role.
    let e2e_admin = e2e::ADMIN_TOKEN;
    let (status, body) = make_key(
        &central,
        e2e_admin,
        json!({"name": "vic's", "user_id": vic, "role": "editor"}),
    )
    .await?;
    assert_eq!(status, 403, "a viewer's key cannot be an editor's: {body}");
    assert_eq!(body["error"], "role_required");
    let (status, body) = make_key(
        &central,
        e2e_admin,
        json!({"name": "vic's", "user_id": vic}),
    )
    .await?;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["role"], "viewer", "a key defaults to its owner's role");
    let vic_key = key_of(&body);
    let vic_key_id = body["id"].as_str().unwrap_or_default().to_string();
    assert!(vic_key.starts_with("pkey_"), "{body}");
    let (_, body) = make_key(&central, e2e_admin, json!({"name": "ed's", "user_id": ed})).await?;
    let ed_key = key_of(&body);
    let (_, body) = make_key(
        &central,
        e2e_admin,
        json!({"name": "ana's", "user_id": ana}),
    )
    .await?;
    let ana_key = key_of(&body);

    // A viewer reads, and every change is refused naming the role it needs.
    let (status, _) = central
        .call(&vic_key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 200);
    let (status, body) = central
        .call(
            &vic_key,
            Method::POST,
            "/api/v1/monitors",
            Some(monitor("by vic")),
        )
        .await?;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"], "role_required");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("editor") && message.contains("viewer"),
        "{message}"
    );
    let (status, _) = central
        .call(&vic_key, Method::GET, "/api/v1/users", None)
        .await?;
    assert_eq!(status, 403, "users are an admin's to read");

    // An editor changes monitors but not users, and cannot make a key above itself.
    let (status, body) = central
        .call(
            &ed_key,
            Method::POST,
            "/api/v1/monitors",
            Some(monitor("by ed")),
        )
        .await?;
    assert_eq!(status, 201, "{body}");
    let monitor_id = body["id"].as_str().unwrap_or_default().to_string();
    let (status, _) = central
        .call(
            &ed_key,
            Method::POST,
            "/api/v1/users",
            Some(json!({"name": "X", "email": "x@example.com", "role": "admin"})),
        )
        .await?;
    assert_eq!(status, 403);
    // Keys come from people: no key makes a key, at any role.
    let (status, body) = make_key(
        &central,
        &ed_key,
        json!({"name": "escalate", "role": "admin"}),
    )
    .await?;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"], "user_required");
    let (status, body) = make_key(
        &central,
        e2e_admin,
        json!({"name": "ed's read-only", "role": "viewer", "user_id": ed}),
    )
    .await?;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["user_id"], json!(ed));
    let ed_reader = key_of(&body);
    // Ed sees his own keys only; the admin every key; no secret in either list.
    let (_, body) = central
        .call(&ed_key, Method::GET, "/api/v1/api-keys", None)
        .await?;
    let names: Vec<&str> = body["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k["name"].as_str())
        .collect();
    assert_eq!(names, ["ed's", "ed's read-only"], "{body}");
    let (_, all) = central
        .call(&ana_key, Method::GET, "/api/v1/api-keys", None)
        .await?;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(4), "{all}");
    assert!(
        !all.to_string().contains(secret_part(&ed_key)),
        "no secret is listed"
    );

    // The admin user manages users; the last admin cannot be demoted or removed.
    let (status, body) = central
        .call(
            &ana_key,
            Method::PATCH,
            &format!("/api/v1/users/{ana}"),
            Some(json!({"role": "viewer"})),
        )
        .await?;
    assert_eq!(status, 409, "{body}");
    let (status, _) = central
        .call(
            &ana_key,
            Method::DELETE,
            &format!("/api/v1/users/{ana}"),
            None,
        )
        .await?;
    assert_eq!(status, 409, "nobody removes themselves");

    // Demoting Ed ends what he held with his old role: his keys stop at once (a person
    // moved to less is given new credentials for what they now do).
    let (status, _) = central
        .call(
            &ana_key,
            Method::PATCH,
            &format!("/api/v1/users/{ed}"),
            Some(json!({"role": "viewer"})),
        )
        .await?;
    assert_eq!(status, 200);
    for (method, path) in [
        (Method::DELETE, format!("/api/v1/monitors/{monitor_id}")),
        (Method::GET, "/api/v1/monitors".to_string()),
    ] {
        let (status, _) = central.call(&ed_key, method, &path, None).await?;
        assert_eq!(status, 401, "a demoted user's key is revoked: {path}");
    }
    // Raising a role takes nothing away.
    let (status, _) = central
        .call(
            &ana_key,
            Method::PATCH,
            &format!("/api/v1/users/{vic}"),
            Some(json!({"role": "editor"})),
        )
        .await?;
    assert_eq!(status, 200);
    let (status, _) = central
        .call(&vic_key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 200, "a promoted user's key still works");

    // A revoked key stops at once; so do a removed user's keys.
    let (status, _) = central
        .call(
            &ana_key,
            Method::DELETE,
            &format!("/api/v1/api-keys/{vic_key_id}"),
            None,
        )
        .await?;
    assert_eq!(status, 204);
    let (status, body) = central
        .call(&vic_key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 401, "{body}");
    let (status, _) = central
        .call(
            &ana_key,
            Method::DELETE,
            &format!("/api/v1/users/{ed}"),
            None,
        )
        .await?;
    assert_eq!(status, 204);
    for key in [&ed_key, &ed_reader] {
        let (status, _) = central
            .call(key, Method::GET, "/api/v1/monitors", None)
            .await?;
        assert_eq!(status, 401, "a removed user's keys stop");
    }
    // They stay listed, revoked: a key's id never becomes "no such key" behind its holder.
    let (_, keys) = central.admin(Method::GET, "/api/v1/api-keys", None).await?;
    let eds: Vec<&Value> = keys["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|k| k["user_id"] == json!(ed))
        .collect();
    assert!(!eds.is_empty(), "{keys}");
    assert!(eds.iter().all(|k| k["revoked_at"].is_string()), "{keys}");
    let (status, body) = central
        .admin(
            Method::DELETE,
            &format!(
                "/api/v1/api-keys/{}",
                eds[0]["id"].as_str().unwrap_or_default()
            ),
            None,
        )
        .await?;
    assert_eq!(status, 409, "revoked already: {body}");

    // A key of the right shape with a wrong secret, and garbage, are refused alike.
    let forged = format!("{}wrong", &ana_key[..ana_key.len() - 5]);
    for bad in [forged.as_str(), "pkey_nonsense"] {
        let (status, body) = central
            .call(bad, Method::GET, "/api/v1/monitors", None)
            .await?;
        assert_eq!(status, 401, "{body}");
    }
    // The admin token still does everything (it is the break-glass credential).
    let (status, _) = central.admin(Method::GET, "/api/v1/users", None).await?;
    assert_eq!(status, 200);
    assert!(
        !central.log().contains(secret_part(&ana_key)),
        "no key secret is logged"
    );

    // A channel's secret is write-only, in the audit log too.
    let channel_secret = "whsec-3f9a1c77d2e84b05";
    central
        .create_channel(json!({"name": "hooks", "kind": "webhook",
            "url": "http://127.0.0.1:9/hook", "secret": channel_secret}))
        .await?;

    let enrolment = central.registration_token().await?;
    // A monitor's credentials to its target live in its headers.
    let target_credential = "Bearer target-cred-91f2c7";
    central
        .create_monitor(json!({"name": "with credentials", "kind": "http",
            "target": "http://127.0.0.1:9/", "interval_ms": 60000,
            "settings": {"headers": {"Authorization": target_credential}}}))
        .await?;

    // The audit log: every change above with its actor, newest first, and no secret at all.
    let (status, log) = central
        .admin(Method::GET, "/api/v1/audit?limit=1000", None)
        .await?;
    assert_eq!(status, 200, "{log}");
    let entries = log["items"].as_array().cloned().unwrap_or_default();
    let find = |kind: &str, action: &str, actor: &str| {
        entries.iter().find(|e| {
            e["object"]["kind"] == kind && e["action"] == action && e["actor"]["name"] == actor
        })
    };
    let created = find("users", "create", "admin token").expect("users made by the admin token");
    assert_eq!(created["actor"]["kind"], "admin_token");
    assert_eq!(created["actor"]["address"], "127.0.0.1");
    let by_ed = find("monitors", "create", "ed's").expect("Ed's key made a monitor");
    assert_eq!(by_ed["actor"]["kind"], "api_key");
    assert_eq!(by_ed["after"]["name"], "by ed");
    let demoted = entries
        .iter()
        .find(|e| e["action"] == "update" && e["object"]["id"] == json!(ed))
        .expect("Ana's key demoted Ed");
    assert_eq!(demoted["actor"]["name"], "ana's");
    assert_eq!(demoted["object"]["id"], json!(ed));
    assert_eq!(demoted["before"]["role"], "editor");
    assert_eq!(demoted["after"]["role"], "viewer");
    assert!(
        find("api-keys", "delete", "ana's").is_some(),
        "the revocation"
    );
    assert!(
        find("monitors", "create", "vic's").is_none(),
        "a refused change is no change"
    );
    let text = log.to_string();
    assert!(find("registration-tokens", "create", "admin token").is_some());
    for secret in [
        STRONG,
        channel_secret,
        secret_part(&ana_key),
        secret_part(&ed_key),
        secret_part(&enrolment),
        target_credential,
    ] {
        assert!(!text.contains(secret), "{secret} is in the audit log");
    }
    // Filters: by actor and by object.
    let (_, mine) = central
        .admin(
            Method::GET,
            &format!("/api/v1/audit?object_kind=users&object_id={ed}"),
            None,
        )
        .await?;
    let actions: Vec<&str> = mine["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        ["delete", "update", "create"],
        "Ed's user, newest first: {mine}"
    );
    let (status, _) = central
        .call(&ana_key, Method::GET, "/api/v1/audit", None)
        .await?;
    assert_eq!(status, 200, "an admin user reads the log");
    central.stop().await;
    Ok(())
}

/// A browser-like client of the page: keeps the session cookie, reads each page's CSRF token.
struct PageClient {
    http: reqwest::Client,
    base: String,
    cookie: std::sync::Mutex<String>,
}

impl PageClient {
    fn new(central: &Central) -> anyhow::Result<PageClient> {
        Ok(PageClient {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
            base: central.url.clone(),
            cookie: std::sync::Mutex::new(String::new()),
        })
    }

    async fn log_in(&self, email: &str, password: &str) -> anyhow::Result<u16> {
        let answer = self
            .http
            .post(format!("{}/login", self.base))
            .form(&[("email", email), ("password", password)])
            .send()
            .await?;
        if let Some(cookie) = answer
            .headers()
            .get(reqwest::header::SET_COOKIE)
            .and_then(|c| c.to_str().ok())
            .and_then(|c| c.split(';').next())
        {
            *self.cookie.lock().unwrap() = cookie.to_string();
        }
        Ok(answer.status().as_u16())
    }

    async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let cookie = self.cookie.lock().unwrap().clone();
        let answer = self
            .http
            .get(format!("{}{path}", self.base))
            .header(reqwest::header::COOKIE, cookie)
            .send()
            .await?;
        Ok((answer.status().as_u16(), answer.text().await?))
    }

    /// Posts a form as the page would, with the CSRF token of the page at `/`.
    async fn post(&self, path: &str) -> anyhow::Result<(u16, String)> {
        self.post_with(path, &[]).await
    }

    /// Posts a form with these fields besides the CSRF token.
    async fn post_with(
        &self,
        path: &str,
        fields: &[(&str, &str)],
    ) -> anyhow::Result<(u16, String)> {
        let (_, page) = self.get("/").await?;
        let csrf = page
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_default()
            .to_string();
        let cookie = self.cookie.lock().unwrap().clone();
        let answer = self
            .http
            .post(format!("{}{path}", self.base))
            .header(reqwest::header::COOKIE, cookie)
            .header("Origin", &self.base)
            .form(
                &[("csrf", csrf.as_str())]
                    .into_iter()
                    .chain(fields.iter().copied())
                    .collect::<Vec<_>>(),
            )
            .send()
            .await?;
        Ok((answer.status().as_u16(), answer.text().await?))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_page_users_log_in_with_a_password_and_act_by_their_role() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let ed = user(&central, "Ed", "editor").await?;
    let vic = user(&central, "Vic", "viewer").await?;
    let monitor_id = central.create_monitor(monitor("web")).await?;
    let pause = format!("/monitors/{monitor_id}/pause");

    let viewer = PageClient::new(&central)?;
    assert_eq!(
        viewer
            .log_in("vic@example.com", "not the password at all")
            .await?,
        401
    );
    assert_eq!(
        viewer.log_in("nobody@example.com", STRONG).await?,
        401,
        "told alike"
    );
    assert_eq!(viewer.log_in("VIC@example.com", STRONG).await?, 303);
    let (status, page) = viewer.get("/").await?;
    assert_eq!(status, 200);
    assert!(page.contains("web"), "a viewer sees the monitors");
    let (status, page) = viewer.post(&pause).await?;
    assert_eq!(status, 403, "a viewer's form is refused: {page}");
    assert!(page.contains("editor"), "the page names the role needed");

    let editor = PageClient::new(&central)?;
    assert_eq!(editor.log_in("ed@example.com", STRONG).await?, 303);
    let (status, _) = editor.post(&pause).await?;
    assert_eq!(status, 303, "an editor pauses");
    let (_, body) = central
        .admin(Method::GET, &format!("/api/v1/monitors/{monitor_id}"), None)
        .await?;
    assert_eq!(body["paused"], true);
    // The page's change is in the audit log under Ed's name, with the monitor before and after.
    let (_, log) = central
        .admin(
            Method::GET,
            &format!("/api/v1/audit?object_id={monitor_id}"),
            None,
        )
        .await?;
    let entry = &log["items"][0];
    assert_eq!(entry["action"], "pause", "{log}");
    assert_eq!(entry["actor"]["kind"], "user");
    assert_eq!(entry["actor"]["name"], "Ed");
    assert_eq!(entry["before"]["paused"], false);
    assert_eq!(entry["after"]["paused"], true);
    let by_users = log["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["actor"]["kind"] == "user")
        .count();
    assert_eq!(by_users, 1, "the viewer's refused form is not in it: {log}");
    // Anyone makes API keys on the page, never above their role; users are an admin's page.
    let (status, page) = editor
        .post_with(
            "/api-keys",
            &[
                ("name", "ed's script"),
                ("role", "admin"),
                ("expires_in", "30d"),
            ],
        )
        .await?;
    assert_eq!(status, 400, "an editor cannot make an admin's key");
    assert!(page.contains("role"), "the form says why");
    let (status, page) = editor
        .post_with(
            "/api-keys",
            &[
                ("name", "ed's script"),
                ("role", "viewer"),
                ("expires_in", "30d"),
            ],
        )
        .await?;
    assert_eq!(status, 200);
    let shown_key = page
        .split("id=\"api-key\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap_or_default()
        .to_string();
    assert!(
        shown_key.starts_with("pkey_"),
        "the key is shown once: {page}"
    );
    let (status, _) = central
        .call(&shown_key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 200);
    // The page's creation is recorded under the id of what it made.
    let (_, keys) = central
        .call(&shown_key, Method::GET, "/api/v1/api-keys", None)
        .await?;
    let key_id = keys["items"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (_, made) = central
        .admin(
            Method::GET,
            &format!("/api/v1/audit?object_kind=api-keys&object_id={key_id}"),
            None,
        )
        .await?;
    let created = made["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["action"] == "create")
        .cloned()
        .unwrap_or_default();
    assert_eq!(created["actor"]["name"], "Ed", "{made}");
    // A change made with a key names the key's user too.
    let (status, _) = central
        .call(
            &shown_key,
            Method::DELETE,
            &format!("/api/v1/api-keys/{key_id}"),
            None,
        )
        .await?;
    assert_eq!(status, 204, "a key revokes itself");
    let (_, by_ed) = central
        .admin(Method::GET, &format!("/api/v1/audit?actor_id={ed}"), None)
        .await?;
    let revoked = by_ed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["actor"]["kind"] == "api_key")
        .cloned()
        .unwrap_or_default();
    assert_eq!(revoked["action"], "delete", "{by_ed}");
    assert_eq!(revoked["actor"]["user_id"], json!(ed), "{by_ed}");
    let (status, _) = editor.get("/users").await?;
    assert_eq!(status, 403);

    // The audit page is an admin's: the editor is refused, the admin token's session reads it.
    let (status, _) = editor.get("/audit").await?;
    assert_eq!(status, 403);
    let admin_page = reqwest::Client::new()
        .get(format!("{}/audit", central.url))
        .header(reqwest::header::COOKIE, central.session_cookie().await?)
        .send()
        .await?;
    assert_eq!(admin_page.status().as_u16(), 200);
    let text = admin_page.text().await?;
    assert!(
        text.contains("Ed") && text.contains("pause"),
        "the page lists Ed's pause"
    );

    // A demotion ends the session on the very next form (the login page, not the form);
    // a removed user's session ends too.
    let (status, _) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/users/{ed}"),
            Some(json!({"role": "viewer"})),
        )
        .await?;
    assert_eq!(status, 200);
    let (status, _) = editor
        .post(&format!("/monitors/{monitor_id}/resume"))
        .await?;
    assert_eq!(status, 303, "sent to the login page");
    let (_, shown) = central
        .admin(Method::GET, &format!("/api/v1/monitors/{monitor_id}"), None)
        .await?;
    assert_eq!(shown["paused"], true, "the form did nothing: {shown}");
    let (status, _) = viewer.post("/logout").await?;
    assert_eq!(status, 303, "a viewer may log out");
    assert_eq!(viewer.log_in("vic@example.com", STRONG).await?, 303);
    let (status, _) = central
        .admin(Method::DELETE, &format!("/api/v1/users/{vic}"), None)
        .await?;
    assert_eq!(status, 204);
    let (status, _) = viewer.get("/").await?;
    assert_eq!(status, 303, "to the login page");
    assert!(!central.log().contains(STRONG), "no password is logged");
    central.stop().await;
    Ok(())
}

/// What a reader may not take away, and what a credential may not outlive: a monitor's
/// credentials to its target are write-only; keys come from people (never from keys), keys of
/// the admin token belong to no one and end with the token; only one of two admins demoted at
/// once loses the role; a new password ends the user's sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_write_only_and_never_outlive_what_made_them() -> anyhow::Result<()> {
    let mut central = Central::start().await?;
    let vic = user(&central, "Vic", "viewer").await?;
    let (_, made) = make_key(
        &central,
        e2e::ADMIN_TOKEN,
        json!({"name": "vic's", "role": "viewer", "user_id": vic}),
    )
    .await?;
    let vic_key = key_of(&made);

    // A viewer reads the monitor, not the credential in its headers; an edit that sends the
    // view back keeps the credential (the poller is still given it).
    let credential = "Bearer target-cred-5d0e21";
    let poller = central.register_poller("p").await?;
    let id = central
        .create_monitor(json!({"name": "guarded", "kind": "http",
            "target": "http://127.0.0.1:9/", "interval_ms": 60000,
            "settings": {"headers": {"Authorization": credential, "Accept": "text/plain"}}}))
        .await?;
    let (status, view) = central
        .call(
            &vic_key,
            Method::GET,
            &format!("/api/v1/monitors/{id}"),
            None,
        )
        .await?;
    assert_eq!(status, 200);
    assert_eq!(view["settings"]["headers"]["Authorization"], "REDACTED");
    let (_, list) = central
        .call(&vic_key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert!(!list.to_string().contains(credential), "{list}");
    let mut settings = view["settings"].clone();
    settings["headers"]["Accept"] = json!("application/json");
    // Kept only for the server it was given for: an edit that moves the target elsewhere
    // must type the credential again.
    let (status, refused) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/monitors/{id}"),
            Some(json!({"target": "http://127.0.0.2:9/", "settings": settings})),
        )
        .await?;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["message"]
        .as_str()
        .unwrap_or_default()
        .contains("settings.headers"));
    let (status, refused) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/monitors/{id}"),
            Some(json!({"target": "http://127.0.0.2:9/"})),
        )
        .await?;
    assert_eq!(
        status, 422,
        "a moved target without its settings: {refused}"
    );
    let (status, edited) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/monitors/{id}"),
            Some(json!({"name": "guarded still", "settings": settings})),
        )
        .await?;
    assert_eq!(status, 200, "{edited}");
    let assigned: Value = reqwest::Client::new()
        .get(format!(
            "{}/api/poller/assignments?since_version=0",
            central.url
        ))
        .bearer_auth(&poller.access)
        .send()
        .await?
        .json()
        .await?;
    let running = assigned["upserts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["id"] == json!(id))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        running["settings"]["headers"],
        json!({"Authorization": credential, "Accept": "application/json"}),
        "the stored credential is kept, the changed header changed: {assigned}"
    );

    // A key cannot make keys.
    let (status, body) = make_key(&central, &vic_key, json!({"name": "child"})).await?;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"], "user_required");

    // Keys made with the admin token are no one's: a viewer one sees itself and cannot revoke
    // an admin one.
    let (_, made) = make_key(
        &central,
        e2e::ADMIN_TOKEN,
        json!({"name": "ci", "role": "admin"}),
    )
    .await?;
    let ci_key = key_of(&made);
    let ci_id = made["key"]["id"].as_str().unwrap_or_default().to_string();
    let (_, made) = make_key(
        &central,
        e2e::ADMIN_TOKEN,
        json!({"name": "dashboard", "role": "viewer"}),
    )
    .await?;
    let dashboard_key = key_of(&made);
    let (status, listed) = central
        .call(&dashboard_key, Method::GET, "/api/v1/api-keys", None)
        .await?;
    assert_eq!(status, 200);
    let names: Vec<&str> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k["name"].as_str())
        .collect();
    assert_eq!(names, ["dashboard"], "{listed}");
    let (status, _) = central
        .call(
            &dashboard_key,
            Method::DELETE,
            &format!("/api/v1/api-keys/{ci_id}"),
            None,
        )
        .await?;
    assert_eq!(status, 404);

    // Of two admins demoted at once, one stays admin (tried several times: it is a race).
    for round in 0..5 {
        let first = user(&central, &format!("First{round}"), "admin").await?;
        let second = user(&central, &format!("Second{round}"), "admin").await?;
        // Every earlier admin steps down first, so that these two are the last.
        let (_, users) = central
            .admin(Method::GET, "/api/v1/users?limit=1000", None)
            .await?;
        for other in users["items"].as_array().into_iter().flatten() {
            let other_id = other["id"].as_str().unwrap_or_default();
            if other["role"] == "admin" && other_id != first && other_id != second {
                let (status, body) = central
                    .admin(
                        Method::PATCH,
                        &format!("/api/v1/users/{other_id}"),
                        Some(json!({"role": "viewer"})),
                    )
                    .await?;
                assert_eq!(status, 200, "{body}");
            }
        }
        let demote = |id: String| {
            let central = &central;
            async move {
                central
                    .admin(
                        Method::PATCH,
                        &format!("/api/v1/users/{id}"),
                        Some(json!({"role": "editor"})),
                    )
                    .await
            }
        };
        let (a, b) = tokio::join!(demote(first.clone()), demote(second.clone()));
        let mut statuses = [a?.0, b?.0];
        statuses.sort();
        assert_eq!(statuses, [200, 409], "round {round}");
    }

    // A new password ends the user's sessions.
    let page = PageClient::new(&central)?;
    assert_eq!(page.log_in("vic@example.com", STRONG).await?, 303);
    assert_eq!(page.get("/").await?.0, 200);
    let (status, body) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/users/{vic}"),
            Some(json!({"password": "a new and long passphrase 4471"})),
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(page.get("/").await?.0, 303, "to the login page");
    // A key Vic makes herself, on the page.
    assert_eq!(
        page.log_in("vic@example.com", "a new and long passphrase 4471")
            .await?,
        303
    );
    let (status, shown) = page
        .post_with("/api-keys", &[("name", "vic's own"), ("role", "viewer")])
        .await?;
    assert_eq!(status, 200);
    let own_key = shown
        .split("id=\"api-key\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap_or_default()
        .to_string();
    assert!(own_key.starts_with("pkey_"), "{shown}");

    // Rotating the admin token stops the keys made with it, and only those.
    let (status, _) = central
        .call(&ci_key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 200);
    let rotated = "e2e-rotated-admin-token-6b1e0c93d7a2";
    central.set_env("CENTRAL_ADMIN_TOKEN", Some(rotated));
    central.restart().await?;
    // Every key made with the token stops, the one made for Vic included.
    for gone in [&ci_key, &dashboard_key, &vic_key] {
        let (status, _) = central
            .call(gone, Method::GET, "/api/v1/monitors", None)
            .await?;
        assert_eq!(status, 401, "a key made with the replaced token stops");
    }
    let (status, _) = central
        .call(&own_key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 200, "a key a user made lives on");
    let (status, _) = central
        .call(rotated, Method::GET, "/api/v1/api-keys", None)
        .await?;
    assert_eq!(status, 200);
    central.stop().await;
    Ok(())
}

/// An editor may change a channel, not take its secrets along: pointing it at another server
/// without typing its secret and header values again is refused (API and page alike), the
/// key in its address's query is shown to nobody, and enrolling pollers (which receive
/// monitors' headers in the clear) is an admin's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_cannot_point_a_channel_or_a_monitor_elsewhere_with_its_secrets(
) -> anyhow::Result<()> {
    let central = Central::start().await?;
    user(&central, "Ed", "editor").await?;
    let ed = user(&central, "Eddie", "editor").await?;
    let (_, made) = make_key(
        &central,
        e2e::ADMIN_TOKEN,
        json!({"name": "eddie's", "role": "editor", "user_id": ed}),
    )
    .await?;
    let ed_key = key_of(&made);
    let channel = central
        .create_channel(json!({"name": "ops", "kind": "webhook",
            "url": "https://hooks.example.com/x?token=query-key-1b9d",
            "secret": "signing-key-1b9d-0123", "headers": {"X-Api-Key": "header-key-1b9d"}}))
        .await?;
    let path = format!("/api/v1/notification-channels/{channel}");

    // Nobody reads the query's key: not a view, not the audit log.
    let (_, view) = central.call(&ed_key, Method::GET, &path, None).await?;
    assert_eq!(
        view["url"], "https://hooks.example.com/x?REDACTED",
        "{view}"
    );

    // Re-pointed with nothing else sent: refused, naming what to type again.
    let (status, refused) = central
        .call(
            &ed_key,
            Method::PATCH,
            &path,
            Some(json!({"url": "http://127.0.0.1:9/collect"})),
        )
        .await?;
    assert_eq!(status, 422, "{refused}");
    let message = refused["message"].as_str().unwrap_or_default();
    for field in ["secret", "headers.X-Api-Key"] {
        assert!(message.contains(field), "{field}: {refused}");
    }
    // Sending the view back (`REDACTED`) is not typing them.
    let (status, refused) = central
        .call(
            &ed_key,
            Method::PATCH,
            &path,
            Some(json!({"url": "http://127.0.0.1:9/collect", "secret": null,
                "headers": {"X-Api-Key": "REDACTED"}})),
        )
        .await?;
    assert_eq!(status, 422, "{refused}");
    // Nor is the view's address with another host: it holds no key to keep.
    let (status, refused) = central
        .call(
            &ed_key,
            Method::PATCH,
            &path,
            Some(json!({"url": "http://127.0.0.1:9/x?REDACTED"})),
        )
        .await?;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["message"]
        .as_str()
        .unwrap_or_default()
        .contains("url"));

    // The page refuses it the same way.
    let page = PageClient::new(&central)?;
    assert_eq!(page.log_in("ed@example.com", STRONG).await?, 303);
    let (status, form) = page
        .post_with(
            &format!("/notifications/channels/{channel}"),
            &[
                ("name", "ops"),
                ("kind", "webhook"),
                ("url", "http://127.0.0.1:9/collect"),
                ("headers", "X-Api-Key: REDACTED"),
            ],
        )
        .await?;
    assert_eq!(status, 400, "{form}");
    assert!(form.contains("headers.X-Api-Key"), "{form}");
    let (_, still) = central.admin(Method::GET, &path, None).await?;
    assert_eq!(
        still["url"], "https://hooks.example.com/x?REDACTED",
        "{still}"
    );

    // Typed again, the channel may go anywhere; a rename keeps everything.
    let (status, renamed) = central
        .call(
            &ed_key,
            Method::PATCH,
            &path,
            Some(json!({"name": "ops 2"})),
        )
        .await?;
    assert_eq!(status, 200, "{renamed}");
    let (status, moved) = central
        .call(
            &ed_key,
            Method::PATCH,
            &path,
            Some(
                json!({"url": "http://127.0.0.1:9/collect", "secret": "another-key-0123456",
                "headers": {"X-Api-Key": "typed-again"}}),
            ),
        )
        .await?;
    assert_eq!(status, 200, "{moved}");

    // The audit log never held the query's key.
    let (_, audit) = central
        .admin(
            Method::GET,
            "/api/v1/audit?object_kind=notification-channels",
            None,
        )
        .await?;
    let text = audit.to_string();
    for secret in [
        "query-key-1b9d",
        "signing-key-1b9d",
        "header-key-1b9d",
        "typed-again",
    ] {
        assert!(!text.contains(secret), "{secret} in the audit log: {audit}");
    }

    // A monitor with a credential moved to other pollers types it again.
    let monitor = central
        .create_monitor(json!({"name": "guarded", "kind": "http",
            "target": "http://127.0.0.1:9/", "interval_ms": 60000,
            "settings": {"method": "POST", "body": "password=body-key-1b9d"}}))
        .await?;
    let (_, shown) = central
        .call(
            &ed_key,
            Method::GET,
            &format!("/api/v1/monitors/{monitor}"),
            None,
        )
        .await?;
    assert_eq!(shown["settings"]["body"], "REDACTED", "{shown}");
    let (status, refused) = central
        .call(
            &ed_key,
            Method::PATCH,
            &format!("/api/v1/monitors/{monitor}"),
            Some(json!({"poller_mode": "grouped", "poller_region": "elsewhere"})),
        )
        .await?;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["message"]
        .as_str()
        .unwrap_or_default()
        .contains("settings.body"));

    // Enrolling a poller is an admin's: an editor could otherwise register one and pin a
    // monitor with secrets to it.
    let (status, body) = central
        .call(
            &ed_key,
            Method::POST,
            "/api/v1/registration-tokens",
            Some(json!({"name": "mine"})),
        )
        .await?;
    assert_eq!(status, 403, "{body}");
    let (status, _) = page.post_with("/tokens", &[("name", "mine")]).await?;
    assert_eq!(status, 403);
    central.stop().await;
    Ok(())
}

/// Sign-ins are in the audit log (who, how, from where; a refused one as `anonymous` with the
/// email tried, never the password), and a login posted from another site is refused (login
/// CSRF: it would sign the visitor in as the attacker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_ins_are_audited_and_a_login_from_another_site_is_refused() -> anyhow::Result<()> {
    let central = Central::start().await?;
    user(&central, "Ana", "viewer").await?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let login = |fields: Vec<(&'static str, String)>,
                 headers: Vec<(&'static str, &'static str)>| {
        let mut request = http.post(format!("{}/login", central.url)).form(&fields);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let ana = || {
        vec![
            ("email", "ana@example.com".to_string()),
            ("password", STRONG.to_string()),
        ]
    };
    let wrong = vec![
        ("email", "ana@example.com".to_string()),
        ("password", "not-the-password-0x51".to_string()),
    ];
    assert_eq!(login(wrong, vec![]).await?.status(), 401);
    for headers in [
        vec![("Origin", "https://evil.example")],
        vec![("Origin", "null")],
        vec![("Sec-Fetch-Site", "cross-site")],
    ] {
        let refused = login(ana(), headers.clone()).await?;
        assert_eq!(refused.status(), 403, "{headers:?}");
        assert!(
            refused.headers().get(reqwest::header::SET_COOKIE).is_none(),
            "no session from another site: {headers:?}"
        );
    }
    let own_origin: &'static str = Box::leak(central.url.clone().into_boxed_str());
    let signed_in = login(ana(), vec![("Origin", own_origin)]).await?;
    assert_eq!(signed_in.status(), 303, "from central's own page");
    // What a browser sends from central's page under its `no-referrer` policy.
    let browser = login(
        ana(),
        vec![("Origin", "null"), ("Sec-Fetch-Site", "same-origin")],
    )
    .await?;
    assert_eq!(browser.status(), 303);
    let admin = login(vec![("token", e2e::ADMIN_TOKEN.to_string())], vec![]).await?;
    assert_eq!(admin.status(), 303);
    let page = PageClient::new(&central)?;
    assert_eq!(page.log_in("ana@example.com", STRONG).await?, 303);
    let (status, _) = page.post("/logout").await?;
    assert_eq!(status, 303);

    let (_, audit) = central
        .admin(Method::GET, "/api/v1/audit?object_kind=sessions", None)
        .await?;
    let events: Vec<(String, String, String)> = audit["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or_default().to_string(),
                e["actor"]["name"].as_str().unwrap_or_default().to_string(),
                e["after"]["method"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let expected = [
        ("logout", "Ana", "logout"),
        ("login", "Ana", "password"),
        ("login", "admin token", "admin_token"),
        ("login", "Ana", "password"),
        ("login", "Ana", "password"),
        ("login_failed", "ana@example.com", "password"),
    ];
    assert_eq!(
        events,
        expected
            .iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect::<Vec<_>>(),
        "newest first: {audit}"
    );
    assert!(
        audit["items"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|e| e["actor"]["address"].as_str() == Some("127.0.0.1")),
        "{audit}"
    );
    assert!(!audit.to_string().contains("not-the-password"), "{audit}");
    let (_, failed) = central
        .admin(Method::GET, "/api/v1/audit?actor_kind=anonymous", None)
        .await?;
    assert_eq!(
        failed["items"].as_array().map(Vec::len),
        Some(1),
        "{failed}"
    );
    central.stop().await;
    Ok(())
}

/// An API key's first call from an address it was never used from is in the audit log, once
/// per address: a key used from somewhere new shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_used_from_a_new_address_is_audited_once_per_address() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let (_, made) = make_key(
        &central,
        e2e::ADMIN_TOKEN,
        json!({"name": "ci", "role": "viewer"}),
    )
    .await?;
    let key = key_of(&made);
    let key_id = made["id"].as_str().unwrap_or_default().to_string();
    for from in [
        "127.0.0.1",
        "127.0.0.1",
        "127.0.6.2",
        "127.0.6.2",
        "127.0.0.1",
    ] {
        let answer = reqwest::Client::builder()
            .local_address(from.parse::<std::net::IpAddr>()?)
            .build()?
            .get(format!("{}/api/v1/monitors", central.url))
            .bearer_auth(&key)
            .send()
            .await?;
        assert_eq!(answer.status(), 200);
    }
    let (_, audit) = central
        .admin(
            Method::GET,
            &format!("/api/v1/audit?object_kind=api-keys&object_id={key_id}"),
            None,
        )
        .await?;
    let uses: Vec<&str> = audit["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["action"] == "use_from_new_address")
        .filter_map(|e| e["after"]["address"].as_str())
        .collect();
    assert_eq!(uses, ["127.0.6.2", "127.0.0.1"], "newest first: {audit}");
    central.stop().await;
    Ok(())
}

/// Runs one statement on central's own database, as an operator's mishap would (a table
/// gone, a disk that refuses writes): SQLite or PostgreSQL alike.
async fn on_the_database(central: &Central, statement: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut db = sqlx::AnyConnection::connect(central.database_url()).await?;
    sqlx::query(statement).execute(&mut db).await?;
    db.close().await?;
    Ok(())
}

async fn audit_actions(central: &Central, object_id: &str) -> anyhow::Result<Vec<String>> {
    let (status, audit) = central
        .admin(
            Method::GET,
            &format!("/api/v1/audit?object_id={object_id}"),
            None,
        )
        .await?;
    anyhow::ensure!(status == 200, "{audit}");
    Ok(audit["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["action"].as_str().map(str::to_string))
        .collect())
}

/// No change without its audit entry: while the entry cannot be written ahead, the change is
/// refused (`503 audit_unavailable`) and not made; an entry whose change went through but
/// could not be written after (central stopped, the log failed) is written by upkeep as
/// unconfirmed, with the object as it then is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_whose_audit_entry_cannot_be_written_is_not_made() -> anyhow::Result<()> {
    let mut central = Central::start().await?;
    let (status, made) = central
        .admin(Method::POST, "/api/v1/monitors", Some(monitor("kept")))
        .await?;
    assert_eq!(status, 201, "{made}");
    let id = made["id"].as_str().unwrap_or_default().to_string();
    let path = format!("/api/v1/monitors/{id}");

    on_the_database(&central, "ALTER TABLE audit_intents RENAME TO intents_away").await?;
    let (status, refused) = central
        .admin(Method::PATCH, &path, Some(json!({"name": "unrecorded"})))
        .await?;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["error"], "audit_unavailable", "{refused}");
    let (_, now) = central.admin(Method::GET, &path, None).await?;
    assert_eq!(now["name"], "kept", "the change was not made");
    let (status, _) = central
        .admin(
            Method::POST,
            "/api/v1/monitors",
            Some(monitor("unrecorded")),
        )
        .await?;
    assert_eq!(status, 503, "nor is a creation");
    let (_, all) = central.admin(Method::GET, "/api/v1/monitors", None).await?;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(1), "{all}");

    // The log itself fails after the change: the change stands, its intent stays…
    on_the_database(&central, "ALTER TABLE intents_away RENAME TO audit_intents").await?;
    on_the_database(&central, "ALTER TABLE audit_log RENAME TO log_away").await?;
    let (status, changed) = central
        .admin(Method::PATCH, &path, Some(json!({"name": "renamed"})))
        .await?;
    assert_eq!(status, 200, "{changed}");
    on_the_database(&central, "ALTER TABLE log_away RENAME TO audit_log").await?;
    assert_eq!(audit_actions(&central, &id).await?, ["create"]);
    // …and once it is long past any request in flight, upkeep (at a start) writes it.
    central.kill().await;
    on_the_database(&central, "UPDATE audit_intents SET at = at - 3600000").await?;
    central.restart().await?;
    e2e::eventually(
        std::time::Duration::from_secs(20),
        "the unconfirmed entry",
        || async { (audit_actions(&central, &id).await.ok()?.len() == 2).then_some(()) },
    )
    .await?;
    // At the time the change was made (here moved an hour back, before the creation).
    assert_eq!(
        audit_actions(&central, &id).await?,
        ["create", "update_unconfirmed"]
    );
    let (_, audit) = central
        .admin(Method::GET, &format!("/api/v1/audit?object_id={id}"), None)
        .await?;
    assert_eq!(audit["items"][1]["after"]["name"], "renamed", "{audit}");
    assert_eq!(audit["items"][1]["before"]["name"], "kept", "{audit}");
    central.stop().await;
    Ok(())
}
