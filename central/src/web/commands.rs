//! Operators' commands on the page: "Check now" and "Reset" on a monitor's page (the answer
//! shown on the page they return to), and how a command's outcome is drawn (also for the
//! form's "Test"). The commands themselves are `service::commands`'.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use shared_proto::settings_api::{CommandState, CommandView};
use uuid::Uuid;

use super::layout::{badge, millis};
use super::session::Session;
use super::WebResult;
use crate::service::commands::{CommandRequest, DEFAULT_WAIT};
use crate::service::App;

/// The page asks every poller that runs the monitor, and waits as the API does by default.
const EVERY_POLLER: CommandRequest = CommandRequest {
    poller_id: None,
    wait: DEFAULT_WAIT,
};

/// At most this many commands are shown from a page's address.
const MAX_SHOWN: usize = 16;

fn csrf_of(pairs: &[(String, String)]) -> &str {
    pairs
        .iter()
        .find(|(key, _)| key == "csrf")
        .map_or("", |(_, value)| value.as_str())
}

/// Back to the monitor's page, which shows what came of the commands.
fn back(id: Uuid, commands: &[CommandView]) -> Response {
    let ids: Vec<String> = commands.iter().map(|c| c.id.to_string()).collect();
    Redirect::to(&format!("/monitors/{id}?commands={}", ids.join(","))).into_response()
}

pub async fn check(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(pairs): Form<Vec<(String, String)>>,
) -> WebResult<Response> {
    session.check(csrf_of(&pairs))?;
    let answer = app.check_monitor_now(id, EVERY_POLLER).await?;
    Ok(back(id, &answer.commands))
}

pub async fn reset(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(pairs): Form<Vec<(String, String)>>,
) -> WebResult<Response> {
    session.check(csrf_of(&pairs))?;
    let answer = app.reset_monitor_engine(id, EVERY_POLLER).await?;
    Ok(back(id, &answer.commands))
}

/// The commands named in a page's address (`?commands=a,b`) that exist; ids that do not
/// parse or exist are left out.
pub async fn named(app: &App, list: &str) -> WebResult<Vec<CommandView>> {
    let mut shown = Vec::new();
    for id in list.split(',').take(MAX_SHOWN) {
        let Ok(id) = Uuid::try_parse(id.trim()) else {
            continue;
        };
        if let Ok(view) = app.command(id).await {
            shown.push(view);
        }
    }
    Ok(shown)
}

/// How the page names a kind of command.
pub fn title_of(kind: &str) -> &'static str {
    match kind {
        "check" => "Check now",
        "reset" => "Reset",
        _ => "Test",
    }
}

/// What came of some commands, one line each.
pub fn outcome(title: &str, commands: &[CommandView]) -> Markup {
    html! {
        section.command-outcome role="status" aria-label={ (title) " outcome" } {
            h2 { (title) }
            ul { @for command in commands { li {
                (state_badge(command.state)) " "
                @if let Some(result) = &command.result {
                    (badge(result.status.as_str())) " " (millis(result.latency_ms)) " "
                    @if !result.msg.is_empty() { span.reason { (result.msg) } " " }
                }
                @if let Some(message) = &command.message { span.muted.small { (message) } }
                @if command.state == CommandState::Sent || command.state == CommandState::Queued {
                    span.muted.small { "no answer yet; reload to see it" }
                }
            } } }
        }
    }
}

fn state_badge(state: CommandState) -> Markup {
    let text = match state {
        CommandState::Queued => "queued",
        CommandState::Sent => "sent",
        CommandState::Done => "done",
        CommandState::Failed => "failed",
        CommandState::Expired => "expired",
    };
    html! { span.command-state { (text) } }
}
