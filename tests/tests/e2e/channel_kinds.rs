//! The notification kinds on-call teams use, with real binaries, each against a local stand-in
//! that checks requests as that service documents them (`e2e::services`): PagerDuty, Opsgenie,
//! Teams, Discord, Telegram, ntfy, Gotify, Pushover, and a webhook whose body is a template.
//! A test send of each, then a monitor going down and up again: the incident tools open one
//! incident under one key and resolve it under the same key, the rest get one message each.

use std::time::Duration;

use e2e::receivers::HttpReceiver;
use e2e::services::{ServiceRequest, Services};
use e2e::{eventually, Central, Target};
use reqwest::Method;
use serde_json::{json, Value};

const ROUTING_KEY: &str = "R0UT1NGK3Y0123456789abcdefABCDEF";
const PUSHOVER_TOKEN: &str = "azGDORePK8gMaC0QOYAMyEEuzJnyUi";
const PUSHOVER_USER: &str = "uQiRzpo4DXghDmr9QzzfQu27cmVRsG";

fn header(request: &ServiceRequest, name: &str) -> String {
    request
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_speaks_its_service_api_and_incidents_resolve_under_one_key() -> anyhow::Result<()>
{
    let central = Central::start_with(&[("CENTRAL_PUBLIC_URL", "https://central.example")]).await?;
    let services = Services::start().await?;
    let hook = HttpReceiver::start().await?;
    let at = |path: &str| format!("{}/{path}", services.url);
    let template = r#"{"text": "{{ monitor.name }} is {{ status }} ({{ severity }})",
                       "problem": "{{ is_problem }}", "where": "{{ link }}", "event": "{{ event }}"}"#;
    let specs = [
        json!({"name": "pd", "kind": "pagerduty", "url": at("pagerduty/v2/enqueue"),
               "secret": ROUTING_KEY, "default": true}),
        json!({"name": "og", "kind": "opsgenie", "url": at("opsgenie"),
               "secret": "0b5c1a2e-opsgenie-api-key", "default": true}),
        json!({"name": "teams", "kind": "teams", "url": at("teams/workflows/abc"), "default": true}),
        json!({"name": "discord", "kind": "discord", "url": at("discord/api/webhooks/1/tok"),
               "default": true}),
        json!({"name": "tg", "kind": "telegram", "url": at("telegram"),
               "secret": "123456:ABC-def_ghi", "chat_id": "-1001234567890", "default": true}),
        json!({"name": "ntfy", "kind": "ntfy", "url": at("ntfy"), "topic": "ops-alerts",
               "secret": "tk_abcdef123", "default": true}),
        json!({"name": "gotify", "kind": "gotify", "url": at("gotify"),
               "secret": "AbCdEfGhIjKlMnO", "default": true}),
        json!({"name": "pushover", "kind": "pushover", "url": at("pushover/1/messages.json"),
               "secret": PUSHOVER_TOKEN, "user_key": PUSHOVER_USER, "default": true}),
        json!({"name": "templated", "kind": "webhook", "url": format!("{}/hook", hook.url),
               "template": template, "default": true}),
    ];
    let mut channels = Vec::new();
    for spec in specs {
        channels.push(central.create_channel(spec).await?);
    }
    // Secrets are write-only here too.
    let (_, view) = central
        .admin(
            Method::GET,
            &format!("/api/v1/notification-channels/{}", channels[0]),
            None,
        )
        .await?;
    assert_eq!(view["has_secret"], true);
    assert!(!view.to_string().contains(ROUTING_KEY), "{view}");

    for channel in &channels {
        let (code, answer) = central.test_channel(channel).await?;
        assert_eq!(
            (code, &answer["delivered"]),
            (200, &json!(true)),
            "{channel}: {answer}"
        );
    }
    // A test opens an incident and resolves it at once, under a key of its own.
    let pd = services.of("pagerduty");
    assert_eq!(
        pd.iter()
            .map(|r| r.json["event_action"].clone())
            .collect::<Vec<_>>(),
        ["trigger", "resolve"]
    );
    assert_eq!(pd[0].json["dedup_key"], pd[1].json["dedup_key"]);
    assert_eq!(pd[0].json["payload"]["severity"], "info");
    let og = services.of("opsgenie");
    assert_eq!(og.len(), 2);
    assert_eq!(og[0].path, "/v2/alerts");
    let test_alias = og[0].json["alias"].as_str().unwrap().to_string();
    assert_eq!(
        og[1].path,
        format!("/v2/alerts/{}/close", test_alias.replace('/', "%2F"))
    );

    let target = Target::start().await?;
    let _agent = central.start_agent("eu-1", "eu").await?;
    let monitor = central
        .create_monitor(
            json!({"name": "shop [eu]", "kind": "http", "target": target.url,
            "interval_ms": 5000}),
        )
        .await?;
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(40))
        .await?;
    target.answer_with(500);
    central
        .wait_for_status(&monitor, "down", Duration::from_secs(40))
        .await?;
    target.answer_with(200);
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(40))
        .await?;
    // The test send, `down` and `up` at each chat and push service; two more requests each
    // at the incident tools.
    let counts = || {
        [
            "pagerduty",
            "opsgenie",
            "teams",
            "discord",
            "telegram",
            "ntfy",
            "gotify",
            "pushover",
        ]
        .map(|s| services.of(s).len())
    };
    eventually(
        Duration::from_secs(30),
        "every kind told down and up",
        || async { (counts() == [4, 4, 3, 3, 3, 3, 3, 3] && hook.count() == 3).then_some(()) },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}; counts {:?}, hook {}", counts(), hook.count()))?;
    assert!(services.refused().is_empty(), "{:?}", services.refused());

    // PagerDuty: one incident, triggered and resolved by the same key, with the routing key.
    let pd = services.of("pagerduty");
    let (trigger, resolve) = (&pd[2].json, &pd[3].json);
    assert_eq!(trigger["event_action"], "trigger");
    assert_eq!(resolve["event_action"], "resolve");
    assert_eq!(trigger["routing_key"], ROUTING_KEY);
    assert_eq!(trigger["dedup_key"], resolve["dedup_key"]);
    assert_eq!(trigger["dedup_key"], format!("central/monitor/{monitor}"));
    assert_eq!(trigger["payload"]["severity"], "critical");
    assert!(trigger["payload"]["summary"]
        .as_str()
        .unwrap()
        .starts_with("[ALERT] shop [eu] is down"));
    assert_eq!(
        trigger["links"][0]["href"],
        format!("https://central.example/monitors/{monitor}")
    );
    // Opsgenie: created and closed by one alias, with the API key.
    let og = services.of("opsgenie");
    assert_eq!(
        header(&og[2], "authorization"),
        "GenieKey 0b5c1a2e-opsgenie-api-key"
    );
    assert_eq!(og[2].json["alias"], format!("central/monitor/{monitor}"));
    assert_eq!(og[2].json["priority"], "P1");
    assert_eq!(
        og[3].path,
        format!("/v2/alerts/central%2Fmonitor%2F{monitor}/close")
    );
    assert_eq!(og[3].query.as_deref(), Some("identifierType=alias"));
    // Teams: an Adaptive Card whose text shows the name as written (Markdown escaped).
    let teams = services.of("teams");
    let card = &teams[1].json["attachments"][0]["content"];
    let text = card["body"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("\\[ALERT\\] shop \\[eu\\] is down"),
        "{text}"
    );
    assert_eq!(card["body"][0]["color"], "Attention");
    // Discord: nobody can be mentioned.
    let discord = services.of("discord");
    assert_eq!(discord[1].json["allowed_mentions"], json!({"parse": []}));
    assert!(discord[2].json["content"]
        .as_str()
        .unwrap()
        .starts_with("\\[RESOLVED\\] shop \\[eu\\] is up again"));
    // Telegram: the bot's token in the path, a numeric chat as a number, plain text.
    let telegram = services.of("telegram");
    assert_eq!(telegram[1].path, "/bot123456:ABC-def_ghi/sendMessage");
    assert_eq!(telegram[1].json["chat_id"], -1001234567890_i64);
    assert!(telegram[1].json.get("parse_mode").is_none());
    // ntfy: the topic, the token, and a louder priority for the problem than the recovery.
    let ntfy = services.of("ntfy");
    assert_eq!(header(&ntfy[1], "authorization"), "Bearer tk_abcdef123");
    assert_eq!(ntfy[1].json["topic"], "ops-alerts");
    assert_eq!(
        (&ntfy[1].json["priority"], &ntfy[2].json["priority"]),
        (&json!(5), &json!(3))
    );
    // Gotify and Pushover likewise.
    let gotify = services.of("gotify");
    assert_eq!(header(&gotify[1], "x-gotify-key"), "AbCdEfGhIjKlMnO");
    assert_eq!(
        (&gotify[1].json["priority"], &gotify[2].json["priority"]),
        (&json!(8), &json!(4))
    );
    let pushover = services.of("pushover");
    assert_eq!(pushover[1].json["token"], PUSHOVER_TOKEN);
    assert_eq!(pushover[1].json["user"], PUSHOVER_USER);
    assert_eq!(
        (&pushover[1].json["priority"], &pushover[2].json["priority"]),
        (&json!(1), &json!(0))
    );
    // The template: fields in strings, and a field alone with its type.
    let bodies: Vec<Value> = hook.received().iter().map(|r| r.json.clone()).collect();
    assert_eq!(
        bodies[1],
        json!({"text": "shop [eu] is down (critical)", "problem": true,
               "where": format!("https://central.example/monitors/{monitor}"),
               "event": "monitor.down"})
    );
    assert_eq!(bodies[2]["problem"], false);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_refuses_what_its_service_could_not_take() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let refusals = [
        (
            json!({"name": "x", "kind": "telegram", "secret": "1:a"}),
            400,
            "chat_id",
        ),
        (
            json!({"name": "x", "kind": "telegram", "secret": "1:a", "chat_id": "me"}),
            400,
            "chat_id",
        ),
        (json!({"name": "x", "kind": "pagerduty"}), 400, "secret"),
        (
            json!({"name": "x", "kind": "pagerduty", "secret": "has spaces in it"}),
            400,
            "secret",
        ),
        (
            json!({"name": "x", "kind": "pushover", "secret": "abc", "user_key": "not-a-key"}),
            400,
            "user_key",
        ),
        (json!({"name": "x", "kind": "ntfy"}), 400, "topic"),
        (
            json!({"name": "x", "kind": "ntfy", "topic": "a/b"}),
            400,
            "topic",
        ),
        (
            json!({"name": "x", "kind": "gotify", "secret": "AbCdEfGhIjKlMnO"}),
            400,
            "url",
        ),
        (
            json!({"name": "x", "kind": "teams", "url": "https://t.example/x", "secret": "s"}),
            400,
            "secret",
        ),
        (
            json!({"name": "x", "kind": "discord", "url": "https://d.example/x", "topic": "t"}),
            400,
            "topic",
        ),
        (
            json!({"name": "x", "kind": "webhook", "url": "https://h.example/x",
                "template": "{{ monitor.secret_sauce }} {{ password }}"}),
            422,
            "template",
        ),
        (
            json!({"name": "x", "kind": "webhook", "url": "https://h.example/x",
                "template": "{\"a\": \"{{ status \"}"}),
            422,
            "template",
        ),
        (
            json!({"name": "x", "kind": "webhook", "url": "https://h.example/x",
                "template": "{{ status }}", "format": "alertmanager_v4"}),
            422,
            "template",
        ),
        (
            json!({"name": "x", "kind": "ntfy", "topic": "t", "secret": "tk",
                "headers": {"Authorization": "Basic eDp5"}}),
            422,
            "headers",
        ),
    ];
    for (spec, code, field) in refusals {
        let (status, body) = central
            .admin(
                Method::POST,
                "/api/v1/notification-channels",
                Some(spec.clone()),
            )
            .await?;
        assert_eq!(status, code, "{spec}: {body}");
        assert!(body.to_string().contains(field), "{spec}: {body}");
    }
    // The services' own addresses are the default.
    let (status, view) = central
        .admin(
            Method::POST,
            "/api/v1/notification-channels",
            Some(json!({"name": "pd", "kind": "pagerduty", "secret": ROUTING_KEY})),
        )
        .await?;
    assert_eq!(status, 201, "{view}");
    assert_eq!(view["url"], Value::Null);
    // An edit can set a field of its kind, not another kind's.
    let id = view["id"].as_str().unwrap();
    let (status, body) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/notification-channels/{id}"),
            Some(json!({"chat_id": "-100"})),
        )
        .await?;
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("chat_id"), "{body}");

    // The page's form: a Telegram channel's chat beside its field when wrong, then saved.
    let cookie = central.session_cookie().await?;
    let web = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let form_page = web
        .get(format!("{}/notifications/channels/new", central.url))
        .header("cookie", &cookie)
        .send()
        .await?
        .text()
        .await?;
    for kind in [
        "pagerduty",
        "opsgenie",
        "teams",
        "discord",
        "telegram",
        "ntfy",
        "gotify",
        "pushover",
    ] {
        assert!(
            form_page.contains(&format!("<option value=\"{kind}\"")),
            "{kind}"
        );
    }
    assert!(form_page.contains("id=\"chat_id\"") && form_page.contains("id=\"template\""));
    let csrf = form_page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a csrf field")
        .to_string();
    let post = |chat: &str| {
        web.post(format!("{}/notifications/channels", central.url))
            .header("cookie", &cookie)
            .header("origin", &central.url)
            .form(&[
                ("csrf", csrf.as_str()),
                ("name", "telegram on call"),
                ("kind", "telegram"),
                ("secret", "123456:ABC-def"),
                ("chat_id", chat),
            ])
            .send()
    };
    let refused = post("me").await?;
    assert_eq!(refused.status(), 400);
    let text = refused.text().await?;
    assert!(text.contains("id=\"chat_id-error\""), "{text}");
    let saved = post("-1001234567890").await?;
    assert_eq!(saved.status(), 303, "{}", saved.text().await?);
    let (_, list) = central
        .admin(Method::GET, "/api/v1/notification-channels", None)
        .await?;
    let telegram = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "telegram")
        .expect("the page's channel");
    assert_eq!(telegram["chat_id"], "-1001234567890");
    assert_eq!(telegram["has_secret"], true);
    Ok(())
}
