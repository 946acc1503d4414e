//! Single sign-on against a real OpenID provider (`oidc-provider` from npm, run with node):
//! the first sign-in in headless Chromium makes the user with the role their groups map to;
//! someone whose groups map to no role, and an unverified email that matches a user, are
//! refused; a tampered state, a replayed code, a wrong audience and a callback from another
//! browser are refused; a provider's new signing key is followed without a restart.

use std::time::Duration;

use e2e::browser::Browser;
use e2e::oidc::{
    browser_like, free_port, sign_in_at_provider, OidcProvider, CLIENT_ID, CLIENT_SECRET,
};
use e2e::Central;
use reqwest::Method;
use serde_json::Value;

/// Central and the provider, each knowing the other's address.
async fn central_with_provider() -> anyhow::Result<(Central, OidcProvider)> {
    central_with_provider_and(&[]).await
}

/// `central_with_provider` with central's environment extended by `extra`.
async fn central_with_provider_and(
    extra: &[(&str, &str)],
) -> anyhow::Result<(Central, OidcProvider)> {
    let central_port = free_port()?;
    let central_url = format!("http://127.0.0.1:{central_port}");
    let provider =
        OidcProvider::start(free_port()?, &format!("{central_url}/login/sso/callback")).await?;
    let listen = format!("127.0.0.1:{central_port}");
    let mut env = vec![
        ("CENTRAL_LISTEN", listen.as_str()),
        ("CENTRAL_PUBLIC_URL", central_url.as_str()),
        ("CENTRAL_OIDC_ISSUER", provider.issuer.as_str()),
        ("CENTRAL_OIDC_CLIENT_ID", CLIENT_ID),
        ("CENTRAL_OIDC_CLIENT_SECRET", CLIENT_SECRET),
        ("CENTRAL_OIDC_SCOPES", "openid email profile groups"),
        (
            "CENTRAL_OIDC_ROLES",
            "ops-admins=admin,ops-editors=editor,ops-viewers=viewer",
        ),
    ];
    env.extend_from_slice(extra);
    let central = Central::start_with(&env).await?;
    Ok((central, provider))
}

async fn user_by_email(central: &Central, email: &str) -> anyhow::Result<Option<Value>> {
    let (status, users) = central
        .admin(Method::GET, "/api/v1/users?limit=1000", None)
        .await?;
    anyhow::ensure!(status == 200, "{users}");
    Ok(users["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|u| u["email"] == email)
        .cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_sign_in_in_the_browser_makes_the_user_with_the_mapped_role() -> anyhow::Result<()>
{
    let (central, _provider) = central_with_provider().await?;
    let browser = Browser::start("sso").await?;
    browser.goto(&format!("{}/login", central.url)).await?;
    browser.click("#sso").await?;
    browser
        .wait_for_path(|path| path.starts_with("/interaction/"))
        .await?;
    browser.fill("input[name=login]", "ana-admin").await?;
    browser.fill("input[name=password]", "anything").await?;
    browser.click("button[type=submit]").await?;
    browser
        .wait_for_text("h1", "Authorize", Duration::from_secs(10), false)
        .await?;
    browser.click("button[type=submit]").await?;
    browser.wait_for_path(|path| path == "/").await?;
    let nav = browser
        .wait_for_text("header.top", "Users", Duration::from_secs(10), false)
        .await?;
    assert!(nav.contains("Audit"), "an admin's page: {nav}");
    browser.screenshot("signed-in").await?;

    let ana = user_by_email(&central, "ana-admin@example.com")
        .await?
        .expect("the first sign-in made the user");
    assert_eq!(ana["role"], "admin", "ops-admins maps to admin: {ana}");
    assert_eq!(ana["single_sign_on"], true, "{ana}");
    assert_eq!(ana["has_password"], false, "{ana}");
    let (_, log) = central
        .admin(
            Method::GET,
            &format!(
                "/api/v1/audit?object_id={}",
                ana["id"].as_str().unwrap_or_default()
            ),
            None,
        )
        .await?;
    assert_eq!(log["items"][0]["action"], "sso_create", "{log}");
    assert_eq!(log["items"][0]["actor"]["name"], "ana-admin", "{log}");

    // Each group its role.
    for (login, role) in [("eve-viewer", "viewer"), ("ed-editor", "editor")] {
        let (http, _) = browser_like()?;
        let back = sign_in_at_provider(&http, &central.url, login).await?;
        let answer = http.get(&back).send().await?;
        assert_eq!(answer.status(), 200, "{login}: {}", answer.text().await?);
        let user = user_by_email(&central, &format!("{login}@example.com"))
            .await?
            .expect("made");
        assert_eq!(user["role"], role, "{user}");
    }
    // Someone in no mapped group is refused (the default role is `none`), and not made.
    let (http, _) = browser_like()?;
    let back = sign_in_at_provider(&http, &central.url, "eve").await?;
    let answer = http.get(&back).send().await?;
    assert_eq!(answer.status(), 401);
    assert!(answer.text().await?.contains("no role here"));
    assert!(user_by_email(&central, "eve@example.com").await?.is_none());

    // An existing user with the same email is linked only if the provider says the email is
    // verified.
    let (status, mia) = central
        .admin(
            Method::POST,
            "/api/v1/users",
            Some(
                serde_json::json!({"name": "Mia", "email": "mia-unverified-viewer@example.com",
                "role": "admin"}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{mia}");
    let (http, _) = browser_like()?;
    let back = sign_in_at_provider(&http, &central.url, "mia-unverified-viewer").await?;
    let answer = http.get(&back).send().await?;
    assert_eq!(answer.status(), 401);
    assert!(answer.text().await?.contains("verified"));
    let mia = user_by_email(&central, "mia-unverified-viewer@example.com")
        .await?
        .expect("still there");
    assert_eq!(mia["single_sign_on"], false, "not linked: {mia}");

    // When it is, the user is linked, not duplicated, and takes the role the claims map to.
    let (status, lin) = central
        .admin(
            Method::POST,
            "/api/v1/users",
            Some(
                serde_json::json!({"name": "Lin", "email": "lin-viewer@example.com",
                "role": "editor"}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{lin}");
    let (http, _) = browser_like()?;
    let back = sign_in_at_provider(&http, &central.url, "lin-viewer").await?;
    assert_eq!(http.get(&back).send().await?.status(), 200);
    let linked = user_by_email(&central, "lin-viewer@example.com")
        .await?
        .expect("still there");
    assert_eq!(linked["id"], lin["id"], "the same user");
    assert_eq!(linked["single_sign_on"], true);
    assert_eq!(linked["role"], "viewer", "the role the claims map to now");
    assert!(
        !central.log().contains(CLIENT_SECRET),
        "the client secret is never logged"
    );
    central.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_replayed_and_misaddressed_sign_ins_are_refused() -> anyhow::Result<()> {
    let (central, mut provider) = central_with_provider().await?;

    // A tampered state: refused before the provider is asked, and nobody is made.
    let (http, _) = browser_like()?;
    let back = sign_in_at_provider(&http, &central.url, "mallory").await?;
    let tampered = back.replace("state=", "state=x");
    let answer = http.get(&tampered).send().await?;
    assert_eq!(answer.status(), 401);
    assert!(answer.text().await?.contains("state"), "the page says why");
    assert!(user_by_email(&central, "mallory@example.com")
        .await?
        .is_none());

    // A callback from another browser (without the pending sign-in's cookie): refused, and
    // not counted as a failed authentication (nobody tried one: `400`), so that links on other
    // sites cannot spend the failure budget from visitors' browsers.
    let back = sign_in_at_provider(&http, &central.url, "mallory").await?;
    let answer = reqwest::Client::new().get(&back).send().await?;
    assert_eq!(answer.status(), 400);
    assert!(
        answer.text().await?.contains("pending"),
        "the page says why"
    );

    // A replayed code: the first use signs in, the same callback again (cookie and all) is
    // refused, because the provider takes a code once.
    let (http, jar) = browser_like()?;
    let back = sign_in_at_provider(&http, &central.url, "vic-viewer").await?;
    let pending = reqwest::cookie::CookieStore::cookies(&*jar, &back.parse()?)
        .and_then(|c| c.to_str().ok().map(str::to_string))
        .unwrap_or_default();
    assert!(pending.contains("central_sso="), "{pending}");
    let first = http.get(&back).send().await?;
    assert_eq!(first.status(), 200);
    let replayed = reqwest::Client::new()
        .get(&back)
        .header(reqwest::header::COOKIE, &pending)
        .send()
        .await?;
    assert_eq!(replayed.status(), 401, "a replayed code");
    assert!(
        central.log().contains("refused the code"),
        "the log says why: {}",
        central.log()
    );

    // An ID token for another audience, signed with the provider's real key.
    provider.tamper_next_audience().await?;
    let (http, _) = browser_like()?;
    let back = sign_in_at_provider(&http, &central.url, "ivy-viewer").await?;
    let answer = http.get(&back).send().await?;
    assert_eq!(answer.status(), 401, "a wrong audience");
    assert!(central.log().contains("audiences"), "{}", central.log());
    assert!(user_by_email(&central, "ivy-viewer@example.com")
        .await?
        .is_none());

    // The provider's new signing key (a restart makes one) is read when a token names it.
    provider.restart().await?;
    // Central reads the keys again at most once a second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (http, _) = browser_like()?;
    let back = sign_in_at_provider(&http, &central.url, "ivy-viewer").await?;
    let answer = http.get(&back).send().await?;
    assert_eq!(answer.status(), 200, "after the key rotation");
    let home = http.get(format!("{}/", central.url)).send().await?;
    assert_eq!(home.status(), 200, "the session works");
    assert!(user_by_email(&central, "ivy-viewer@example.com")
        .await?
        .is_some());
    central.stop().await;
    Ok(())
}

/// Leaving at the provider ends access here: once the provider puts a linked person in no
/// mapped group, their next sign-in attempt ends their sessions, revokes their keys and
/// drops their password; a linked account never signs in with a password; and signing in
/// never takes over an account with a password or an admin's by email alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removal_at_the_provider_ends_sessions_keys_and_password() -> anyhow::Result<()> {
    const STRONG: &str = "correct horse battery staple";
    let (central, provider) = central_with_provider().await?;
    let (http, _) = browser_like()?;
    let back = sign_in_at_provider(&http, &central.url, "rae-editor").await?;
    assert_eq!(http.get(&back).send().await?.status(), 200);
    let rae = user_by_email(&central, "rae-editor@example.com")
        .await?
        .expect("made");
    let id = rae["id"].as_str().unwrap_or_default().to_string();
    // A password set on the linked account, and a key for it.
    let (status, body) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/users/{id}"),
            Some(serde_json::json!({"password": STRONG})),
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    let (status, made) = central
        .admin(
            Method::POST,
            "/api/v1/api-keys",
            Some(serde_json::json!({"name": "rae's", "role": "editor", "user_id": id})),
        )
        .await?;
    assert_eq!(status, 201, "{made}");
    let key = made["token"].as_str().unwrap_or_default().to_string();
    let (status, _) = central
        .call(&key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 200);
    // (The new password ended the first session: sign in again.)
    let back = sign_in_at_provider(&http, &central.url, "rae-editor").await?;
    assert_eq!(http.get(&back).send().await?.status(), 200);
    let (session_status, page) = page_status(&http, &central.url).await?;
    assert_eq!(
        session_status, 200,
        "the session opened by single sign-on: {page}"
    );

    // A linked account signs in through its provider only.
    let login = reqwest::Client::new()
        .post(format!("{}/login", central.url))
        .form(&[("email", "rae-editor@example.com"), ("password", STRONG)])
        .send()
        .await?;
    assert_eq!(login.status(), 401);
    assert!(login.text().await?.contains("single sign-on"));

    // Removed at the provider: the next attempt is refused, and everything ends.
    provider.remove("rae-editor").await?;
    let (again, _) = browser_like()?;
    let back = sign_in_at_provider(&again, &central.url, "rae-editor").await?;
    let answer = again.get(&back).send().await?;
    assert_eq!(answer.status(), 401);
    assert!(answer.text().await?.contains("no role here"));
    let (status, _) = central
        .call(&key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 401, "the key is revoked");
    let (session_status, _) = page_status(&http, &central.url).await?;
    assert_ne!(session_status, 200, "the session is gone");
    let rae = user_by_email(&central, "rae-editor@example.com")
        .await?
        .expect("kept, for the audit log");
    assert_eq!(rae["has_password"], false, "{rae}");
    let (_, audit) = central
        .admin(
            Method::GET,
            &format!("/api/v1/audit?object_kind=users&object_id={id}"),
            None,
        )
        .await?;
    assert_eq!(audit["items"][0]["action"], "sso_removed", "{audit}");

    // An email the provider vouches for does not take over an account with a password, nor
    // an admin's.
    for (login, role, password) in [
        ("kim-viewer", "viewer", Some(STRONG)),
        ("ada-viewer", "admin", None),
    ] {
        let mut body = serde_json::json!({"name": login, "email": format!("{login}@example.com"),
            "role": role});
        if let Some(password) = password {
            body["password"] = serde_json::json!(password);
        }
        let (status, made) = central
            .admin(Method::POST, "/api/v1/users", Some(body))
            .await?;
        assert_eq!(status, 201, "{made}");
        let (http, _) = browser_like()?;
        let back = sign_in_at_provider(&http, &central.url, login).await?;
        let answer = http.get(&back).send().await?;
        assert_eq!(answer.status(), 401, "{login}");
        assert!(answer
            .text()
            .await?
            .contains("does not take such an account over"));
        let user = user_by_email(&central, &format!("{login}@example.com"))
            .await?
            .expect("kept");
        assert_eq!(user["single_sign_on"], false, "not linked: {user}");
        assert_eq!(user["role"], role, "{user}");
    }
    central.stop().await;
    Ok(())
}

/// The status of the page's front page for `http`'s session (a redirect to the login page
/// when it has none).
async fn page_status(http: &reqwest::Client, base: &str) -> anyhow::Result<(u16, String)> {
    let answer = http.get(format!("{base}/")).send().await?;
    let status = answer.status().as_u16();
    let location = answer
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|l| l.to_str().ok())
        .unwrap_or_default()
        .to_string();
    Ok((status, format!("{location} {}", answer.text().await?)))
}

/// Central does not wait for a removed person to try again: it checks each linked user with
/// the provider every `CENTRAL_OIDC_RECHECK` (here 2 s) with the refresh token their sign-in
/// got, and their session and keys end once the provider maps them to no role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_periodic_check_ends_the_access_of_someone_removed_at_the_provider() -> anyhow::Result<()>
{
    let (central, provider) = central_with_provider_and(&[("CENTRAL_OIDC_RECHECK", "2s")]).await?;
    let (http, _) = browser_like()?;
    let back = sign_in_at_provider(&http, &central.url, "ivy-editor").await?;
    assert_eq!(http.get(&back).send().await?.status(), 200);
    let ivy = user_by_email(&central, "ivy-editor@example.com")
        .await?
        .expect("made");
    let id = ivy["id"].as_str().unwrap_or_default().to_string();
    let (status, made) = central
        .admin(
            Method::POST,
            "/api/v1/api-keys",
            Some(serde_json::json!({"name": "ivy's", "role": "editor", "user_id": id})),
        )
        .await?;
    assert_eq!(status, 201, "{made}");
    let key = made["token"].as_str().unwrap_or_default().to_string();
    // Checked and still there: nothing ends.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (status, _) = central
        .call(&key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 200, "still at the provider, still in");
    assert_eq!(page_status(&http, &central.url).await?.0, 200);

    provider.remove("ivy-editor").await?;
    e2e::eventually(
        Duration::from_secs(20),
        "the key revoked by a check",
        || async {
            let (status, _) = central
                .call(&key, Method::GET, "/api/v1/monitors", None)
                .await
                .ok()?;
            (status == 401).then_some(())
        },
    )
    .await?;
    assert_ne!(
        page_status(&http, &central.url).await?.0,
        200,
        "the session is gone"
    );
    let (_, audit) = central
        .admin(
            Method::GET,
            &format!("/api/v1/audit?object_kind=users&object_id={id}"),
            None,
        )
        .await?;
    assert_eq!(audit["items"][0]["action"], "sso_removed", "{audit}");
    // Once ended, the link is forgotten: later rounds do not end (and record) it again.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (_, audit) = central
        .admin(
            Method::GET,
            &format!("/api/v1/audit?object_kind=users&object_id={id}"),
            None,
        )
        .await?;
    let removals = audit["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["action"] == "sso_removed")
        .count();
    assert_eq!(removals, 1, "{audit}");
    central.stop().await;
    Ok(())
}
