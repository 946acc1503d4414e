//! How the OpenAPI document states the answers visitors of status pages and badges get
//! besides the one they came for: refusals are pages for people (HTML), except where the
//! request pools answer before a handler does (`429`, `503`, JSON as on every API). The
//! operations themselves are annotated at their handlers; `api::openapi` lists them.
//! Must not: produce an answer (the handlers and `super::refusal` do).

use std::collections::BTreeMap;

use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::{Ref, RefOr};
use utoipa::IntoResponses;

const NOT_MODIFIED: &str =
    "The reader holds this answer already (`If-None-Match` names its `ETag`).";
const LOCKED: &str = "A `password` page without its cookie (the page with the password form), \
                      or a `users` page without a session of central (a link to sign in).";
const NO_PAGE: &str = "No page with this slug (for `logo`, or a page without a logo): a page \
                       for people, in HTML.";
const NO_SUBSCRIPTION: &str = "The link opens no subscription: no such page, a wrong token, \
                               or a subscription that has ended (the same answer for each).";
const NOT_SHOWN: &str = "No `public` status page shows this monitor (or has this slug).";
const LOCKED_OUT: &str = "`rate_limited`: too many failed attempts from this client (a page's \
                          password, like a login); retry after `Retry-After` seconds.";
const OVERLOADED: &str = "`overloaded`: the places for visitors are all taken; retry after \
                          `Retry-After` seconds.";

/// One answer: `content_type` with a body of `schema`, or none.
fn answer(
    description: &str,
    body: Option<(&str, RefOr<utoipa::openapi::schema::Schema>)>,
) -> RefOr<Response> {
    let mut response = ResponseBuilder::new().description(description);
    if let Some((content_type, schema)) = body {
        response = response.content(
            content_type,
            ContentBuilder::new().schema(Some(schema)).build(),
        );
    }
    RefOr::T(response.build())
}

fn html(description: &str) -> RefOr<Response> {
    let text = utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .build();
    answer(description, Some(("text/html", RefOr::T(text.into()))))
}

fn error(description: &str) -> RefOr<Response> {
    answer(
        description,
        Some((
            "application/json",
            Ref::from_schema_name("ErrorBody").into(),
        )),
    )
}

/// The pools' answers, which any public operation may get.
fn pooled(mut answers: BTreeMap<String, RefOr<Response>>) -> BTreeMap<String, RefOr<Response>> {
    answers.insert("429".into(), error(LOCKED_OUT));
    answers.insert("503".into(), error(OVERLOADED));
    answers
}

/// A page's renderings (the page, `summary.json`, the feed, the logo): `304`, and refusals.
pub struct PageAnswers;

impl IntoResponses for PageAnswers {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        pooled(BTreeMap::from([
            ("304".into(), answer(NOT_MODIFIED, None)),
            ("401".into(), html(LOCKED)),
            ("404".into(), html(NO_PAGE)),
        ]))
    }
}

/// A subscription's links (`…/confirm`, `…/unsubscribe`).
pub struct LinkAnswers;

impl IntoResponses for LinkAnswers {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        pooled(BTreeMap::from([("404".into(), html(NO_SUBSCRIPTION))]))
    }
}

/// Badges: `304`, or none for what no public page shows.
pub struct BadgeAnswers;

impl IntoResponses for BadgeAnswers {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        pooled(BTreeMap::from([
            ("304".into(), answer(NOT_MODIFIED, None)),
            ("404".into(), html(NOT_SHOWN)),
        ]))
    }
}
