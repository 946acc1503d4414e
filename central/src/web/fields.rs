//! What the page's forms share: a labelled input with its hint and, beside it, the message of
//! the error that names it; how a service error finds that field; and `Name: value` lines for
//! HTTP headers. Forms keep what was typed as text, so a refused form comes back as it was left.

use crate::service::error::ServiceError;
use std::collections::BTreeMap;

use maud::{html, Markup};

/// A message for one field (or for the whole form, `field` empty).
#[derive(Debug, Clone)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: &str, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The field a service error names, as a form field: `to[1]` is the `to` box, a nested
    /// `settings.confirm_down` the `settings` box. `None` when the error is not about input.
    pub fn of_service(error: &ServiceError) -> Option<FieldError> {
        match error {
            ServiceError::Validation(e) => {
                let base = e.field.split(['.', '[']).next().unwrap_or_default();
                Some(FieldError::new(
                    base,
                    format!("`{}` {}", e.field, e.message),
                ))
            }
            ServiceError::Invalid { message, .. } => Some(FieldError::new("", message.clone())),
            _ => None,
        }
    }
}

/// The message of `error` when it names `field`, for the input's `aria-describedby`.
pub fn error_for<'e>(error: Option<&'e FieldError>, field: &str) -> Option<&'e str> {
    error
        .filter(|e| e.field == field)
        .map(|e| e.message.as_str())
}

/// The error's paragraph under an input (its id is `<field>-error`), or nothing.
pub fn message(field: &str, error: Option<&FieldError>) -> Markup {
    html! { @if let Some(message) = error_for(error, field) {
        p.field-error id={ (field) "-error" } role="alert" { (message) }
    } }
}

/// A labelled one-line input named and identified `field`.
pub fn text_field(
    field: &str,
    label: &str,
    value: &str,
    hint: &str,
    error: Option<&FieldError>,
) -> Markup {
    labelled(field, label, hint, error, false, value)
}

/// A labelled box of several lines named and identified `field`.
pub fn text_area(
    field: &str,
    label: &str,
    value: &str,
    hint: &str,
    error: Option<&FieldError>,
) -> Markup {
    labelled(field, label, hint, error, true, value)
}

fn labelled(
    field: &str,
    label: &str,
    hint: &str,
    error: Option<&FieldError>,
    lines: bool,
    value: &str,
) -> Markup {
    let invalid = error_for(error, field).map(|_| "true");
    let described = invalid.map(|_| format!("{field}-error"));
    html! {
        div.field {
            label for=(field) { (label) }
            @if lines {
                textarea id=(field) name=(field) rows="3" aria-invalid=[invalid]
                    aria-describedby=[&described] { (value) }
            } @else {
                input id=(field) name=(field) type="text" value=(value) aria-invalid=[invalid]
                    aria-describedby=[&described];
            }
            @if !hint.is_empty() { p.hint { (hint) } }
            (message(field, error))
        }
    }
}

/// Typed text, or `None` when only blanks were typed.
pub fn optional(text: &str) -> Option<String> {
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
}

/// Headers as the lines a person types them in.
pub fn headers_text<'a>(headers: impl IntoIterator<Item = (&'a String, &'a str)>) -> String {
    headers
        .into_iter()
        .map(|(name, value)| format!("{name}: {value}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `Name: value` lines (blank ones skipped); names and values are the service's to judge.
pub fn parse_headers(field: &str, text: &str) -> Result<BTreeMap<String, String>, FieldError> {
    let mut headers = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').ok_or_else(|| {
            FieldError::new(
                field,
                format!("`{line}` has no `:`; write one header per line, like Accept: text/html"),
            )
        })?;
        headers.insert(name.trim().to_string(), value.trim().to_string());
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lines_read_back_as_written() {
        let text = "Accept: text/html\n\n  X-Token: a:b  \n";
        let headers = parse_headers("headers", text).unwrap();
        assert_eq!(headers["X-Token"], "a:b");
        let again = headers_text(headers.iter().map(|(k, v)| (k, v.as_str())));
        assert_eq!(again, "Accept: text/html\nX-Token: a:b");
        assert_eq!(
            parse_headers("headers", "no colon").unwrap_err().field,
            "headers"
        );
    }

    #[test]
    fn a_service_error_names_its_form_field() {
        let error = ServiceError::Validation(shared_proto::ValidationError::new(
            "to[1]",
            "is not a mail address",
        ));
        assert_eq!(FieldError::of_service(&error).unwrap().field, "to");
    }
}
