//! Subscribers of status pages, with the real binary, a webhook receiver and an SMTP server:
//! double opt-in (only the confirmation goes out until someone confirms, by a `POST`; the
//! link's `GET` shows the button and changes nothing), a notice for each published incident's
//! creation, update and resolution (none for drafts until they are published), signed
//! webhooks with the delivery's id, mail with the unsubscribe link in the text and in
//! `List-Unsubscribe` (one-click by `POST`), the same `202` whether or not an address was
//! subscribed, confirmations limited per address, and the operators' list (admins only).

use std::time::Duration;

use e2e::receivers::{HttpReceiver, SmtpSink};
use e2e::{eventually, Central};
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{json, Value};
use sha2::Sha256;

const SECRET: &str = "a-subscriber-secret";

/// A status page `acme` over one monitor; its id.
async fn page(central: &Central) -> anyhow::Result<String> {
    let monitor = central
        .create_monitor(
            json!({"name": "api", "kind": "http", "target": "http://127.0.0.1:9/",
            "interval_ms": 60000}),
        )
        .await?;
    let (status, page) = central
        .admin(
            Method::POST,
            "/api/v1/status-pages",
            Some(json!({"slug": "acme", "title": "Acme status",
                "sections": [{"name": "API", "monitor_ids": [monitor]}]})),
        )
        .await?;
    assert_eq!(status, 201, "{page}");
    Ok(page["id"].as_str().unwrap().to_string())
}

/// `POST /status/acme/subscribe` with a JSON body.
async fn subscribe(central: &Central, body: Value) -> anyhow::Result<(u16, Value)> {
    let response = reqwest::Client::new()
        .post(format!("{}/status/acme/subscribe", central.url))
        .json(&body)
        .send()
        .await?;
    Ok((response.status().as_u16(), response.json().await?))
}

/// The path and query of a link under `CENTRAL_PUBLIC_URL`, at this central.
fn local(central: &Central, link: &str) -> String {
    let path = link.split_once("://").unwrap().1;
    let path = &path[path.find('/').unwrap()..];
    format!("{}{path}", central.url)
}

async fn incident(central: &Central, page: &str, body: Value) -> anyhow::Result<Value> {
    let (status, made) = central
        .admin(
            Method::POST,
            &format!("/api/v1/status-pages/{page}/incidents"),
            Some(body),
        )
        .await?;
    assert_eq!(status, 201, "{made}");
    Ok(made)
}

fn events(receiver: &HttpReceiver) -> Vec<String> {
    receiver
        .received()
        .iter()
        .map(|r| r.json["event"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_subscriber_confirms_and_hears_of_published_incidents() -> anyhow::Result<()> {
    let central =
        // Strangers' webhooks go to the public internet only, unless allowed here (the
        // receiver is on loopback).
        Central::start_with(&[
            ("CENTRAL_PUBLIC_URL", "https://status.example.com"),
            ("CENTRAL_SUBSCRIBER_ALLOWED_NETWORKS", "127.0.0.0/8"),
        ])
        .await?;
    let page = page(&central).await?;
    let receiver = HttpReceiver::start().await?;
    let hook = format!("{}/hook", receiver.url);

    // Refused, naming the field; the page's form offers no mail (no CENTRAL_MAIL_URL).
    for (body, code, field) in [
        (json!({}), 400, "email"),
        (
            json!({"webhook_url": "javascript:alert(1)"}),
            400,
            "webhook_url",
        ),
        (json!({"email": "a@example.com"}), 422, "email"),
        (
            json!({"webhook_url": hook, "email": "a@example.com"}),
            422,
            "webhook_url",
        ),
        (json!({"webhook_url": hook, "extra": 1}), 400, "body"),
    ] {
        let (status, answer) = subscribe(&central, body.clone()).await?;
        assert_eq!(status, code, "{body}: {answer}");
        assert!(
            answer["message"]
                .as_str()
                .unwrap_or_default()
                .contains(field),
            "names `{field}`: {answer}"
        );
    }
    let html = reqwest::get(format!("{}/status/acme", central.url))
        .await?
        .text()
        .await?;
    assert!(html.contains("name=\"webhook_url\"") && !html.contains("name=\"email\""));

    let (status, first) =
        subscribe(&central, json!({"webhook_url": hook, "secret": SECRET})).await?;
    assert_eq!(status, 202, "{first}");
    let confirmation = eventually(Duration::from_secs(15), "the confirmation", || async {
        receiver.received().into_iter().next()
    })
    .await?;
    assert_eq!(confirmation.json["event"], "subscription.confirm");
    assert_eq!(
        confirmation.json["page"]["url"],
        "https://status.example.com/status/acme"
    );
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes())?;
    mac.update(confirmation.body.as_bytes());
    assert_eq!(
        confirmation.signature.as_deref(),
        Some(format!("sha256={}", hex::encode(mac.finalize().into_bytes())).as_str()),
        "signed with the subscriber's secret"
    );
    assert_eq!(
        confirmation.notification_id.as_deref(),
        confirmation.json["id"].as_str()
    );
    let confirm = local(&central, confirmation.json["confirm_url"].as_str().unwrap());
    let unsubscribe = local(
        &central,
        confirmation.json["unsubscribe_url"].as_str().unwrap(),
    );

    // Nothing but the confirmation until it is confirmed.
    let page_id = &page;
    incident(
        &central,
        page_id,
        json!({"title": "Before", "message": "x"}),
    )
    .await?;
    // Asked again while pending: the same answer, no second confirmation.
    let (status, again) = subscribe(&central, json!({"webhook_url": hook})).await?;
    assert_eq!((status, &again), (202, &first), "no oracle");
    // The link's GET shows a button and changes nothing; a wrong token opens nothing.
    let shown = reqwest::get(&confirm).await?;
    assert_eq!(shown.status(), 200);
    assert!(shown.text().await?.contains("<form method=\"post\""));
    let wrong = confirm.replace("token=", "token=00");
    let refused = reqwest::Client::new().post(&wrong).send().await?;
    assert_eq!(refused.status(), 404);
    let (_, listed) = central
        .admin(
            Method::GET,
            &format!("/api/v1/status-pages/{page_id}/subscribers"),
            None,
        )
        .await?;
    assert_eq!(listed["items"][0]["status"], "pending", "{listed}");
    let shown_address = listed["items"][0]["address"].as_str().unwrap();
    assert!(
        !shown_address.contains("/hook"),
        "a webhook is shown by its host: {shown_address}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(events(&receiver), ["subscription.confirm"]);

    let done = reqwest::Client::new().post(&confirm).send().await?;
    assert_eq!(done.status(), 200);
    // Nor in its time: a confirmed address (nothing written) is answered no sooner than a
    // new one (a subscription and its confirmation written).
    let asked = std::time::Instant::now();
    let (status, confirmed) = subscribe(&central, json!({"webhook_url": hook})).await?;
    assert!(
        asked.elapsed() >= Duration::from_millis(250),
        "answered in {:?}",
        asked.elapsed()
    );
    assert_eq!(
        (status, &confirmed),
        (202, &first),
        "no oracle once confirmed either"
    );

    // A published incident, a draft (nothing), the draft published, an update, a resolution.
    let open = incident(
        &central,
        page_id,
        json!({"title": "Slow logins", "message": "Looking."}),
    )
    .await?;
    let (status, draft) = central
        .admin(
            Method::POST,
            &format!("/api/v1/status-pages/{page_id}/incidents"),
            Some(json!({"title": "Draft", "message": "Not yet."})),
        )
        .await?;
    assert_eq!(status, 201);
    let draft_path = format!(
        "/api/v1/status-pages/{page_id}/incidents/{}",
        draft["id"].as_str().unwrap()
    );
    let (status, _) = central
        .admin(
            Method::PATCH,
            &draft_path,
            Some(json!({"published": false})),
        )
        .await?;
    assert_eq!(status, 200);
    // Published by eight operators at once: one of them publishes it, and subscribers are
    // told once (each change is decided from the incident as it is when written).
    let publishing =
        (0..8).map(|_| central.admin(Method::PATCH, &draft_path, Some(json!({"published": true}))));
    for answer in futures_util::future::join_all(publishing).await {
        let (status, body) = answer?;
        assert_eq!(status, 200, "{body}");
    }
    let updates = format!(
        "/api/v1/status-pages/{page_id}/incidents/{}/updates",
        open["id"].as_str().unwrap()
    );
    for (status, message) in [("identified", "Found it."), ("resolved", "Fixed.")] {
        let (code, body) = central
            .admin(
                Method::POST,
                &updates,
                Some(json!({"status": status, "message": message})),
            )
            .await?;
        assert_eq!(code, 201, "{body}");
    }
    let told = eventually(Duration::from_secs(20), "five notices", || async {
        let seen = events(&receiver);
        (seen.len() >= 6).then_some(seen)
    })
    .await?;
    // The draft was created published (`POST` publishes) and its unpublish/publish made it
    // news again: created twice for it is what subscribers of a re-published incident get.
    assert_eq!(
        told,
        [
            "subscription.confirm",
            "incident.created",
            "incident.created",
            "incident.created",
            "incident.updated",
            "incident.resolved"
        ]
    );
    let last = receiver.received().pop().unwrap();
    assert_eq!(last.json["incident"]["title"], "Slow logins");
    assert_eq!(last.json["incident"]["status"], "resolved");
    assert_eq!(last.json["incident"]["message"], "Fixed.");

    // Unsubscribed by a POST to its link (the GET only shows the button).
    let shown = reqwest::get(&unsubscribe).await?;
    assert_eq!(shown.status(), 200);
    let gone = reqwest::Client::new().post(&unsubscribe).send().await?;
    assert_eq!(gone.status(), 200);
    incident(&central, page_id, json!({"title": "After", "message": "x"})).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(receiver.received().len(), 6, "nothing after unsubscribing");
    let again = reqwest::Client::new().post(&unsubscribe).send().await?;
    assert_eq!(again.status(), 404, "the link opens nothing any more");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_subscribers_confirm_by_post_and_unsubscribe_in_one_click() -> anyhow::Result<()> {
    let sink = SmtpSink::start().await?;
    let central = Central::start_with(&[
        ("CENTRAL_PUBLIC_URL", "https://status.example.com"),
        ("CENTRAL_MAIL_URL", sink.url.as_str()),
        ("CENTRAL_MAIL_FROM", "status@example.com"),
    ])
    .await?;
    let page_id = page(&central).await?;
    // The page's own form, as a browser sends it: a page saying what happens next.
    let form = reqwest::Client::new()
        .post(format!("{}/status/acme/subscribe", central.url))
        .form(&[("email", "Ana@Example.com")])
        .send()
        .await?;
    assert_eq!(form.status(), 202);
    assert!(form.text().await?.contains("Check your inbox"));
    let mail = eventually(Duration::from_secs(15), "the confirmation mail", || async {
        sink.mails().into_iter().next()
    })
    .await?;
    assert!(mail.contains("ana@example.com"), "{mail}");
    assert!(
        mail.contains("List-Unsubscribe-Post: List-Unsubscribe=One-Click"),
        "{mail}"
    );
    // Mail bodies are quoted-printable: soft line breaks joined, `=3D` read as `=`.
    let decoded = |mail: &str| mail.replace("=\n", "").replace("=3D", "=");
    let link = |mail: &str, what: &str| {
        decoded(mail)
            .split_whitespace()
            .find(|w| w.starts_with("https://status.example.com/") && w.contains(what))
            .map(|w| local(&central, w.trim_matches(|c| c == '<' || c == '>')))
            .unwrap_or_else(|| panic!("no {what} link in {mail}"))
    };
    let confirm = link(&mail, "/confirm?token=");

    // Asked again at once: one confirmation, however often the form is sent.
    for _ in 0..3 {
        let (status, _) = subscribe(&central, json!({"email": "ana@example.com"})).await?;
        assert_eq!(status, 202);
    }
    // A mail scanner opens the link: nothing is confirmed.
    assert_eq!(reqwest::get(&confirm).await?.status(), 200);
    incident(
        &central,
        &page_id,
        json!({"title": "Unseen", "message": "x"}),
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(sink.mails().len(), 1, "{:?}", sink.mails());

    assert_eq!(
        reqwest::Client::new().post(&confirm).send().await?.status(),
        200
    );
    incident(
        &central,
        &page_id,
        json!({"title": "Checkout errors", "message": "We are **looking** into it."}),
    )
    .await?;
    let notice = eventually(Duration::from_secs(15), "the incident's mail", || async {
        sink.mails().into_iter().nth(1)
    })
    .await?;
    assert!(notice.contains("New incident: Checkout errors"), "{notice}");
    assert!(
        decoded(&notice).contains("We are **looking** into it."),
        "{notice}"
    );
    let unsubscribe = link(&notice, "/unsubscribe?token=");
    // A mail program's one-click unsubscribe (RFC 8058).
    let clicked = reqwest::Client::new()
        .post(&unsubscribe)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("List-Unsubscribe=One-Click")
        .send()
        .await?;
    assert_eq!(clicked.status(), 200);
    let (_, listed) = central
        .admin(
            Method::GET,
            &format!("/api/v1/status-pages/{page_id}/subscribers"),
            None,
        )
        .await?;
    assert_eq!(listed["items"], json!([]), "{listed}");
    Ok(())
}
