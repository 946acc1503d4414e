//! Tags: the operator's own labels on monitors (`team:db`, `env:prod`), and the rules for
//! them. A tag is matched whole and case-sensitively wherever something targets tags (the
//! monitor list's filter, maintenance windows, notification channels, pause and resume by
//! tag). Must not: know what a tag means; central stores and matches them.

use serde::{Deserialize, Serialize};

use crate::ValidationError;

/// The most tags one monitor carries.
pub const MAX_MONITOR_TAGS: usize = 20;

/// The longest tag.
pub const MAX_TAG_LEN: usize = 64;

/// What [`validate_tag`] accepts, for the OpenAPI document.
pub const TAG_PATTERN: &str = r"^[A-Za-z0-9._:/=-]{1,64}$";

/// One tag: 1 to 64 letters, digits, `-`, `_`, `.`, `:`, `/` or `=` (so `team:db`,
/// `env=prod` and `k8s/ns` read as they are written, and a tag is safe in a URL query, a
/// Prometheus label value and a page without escaping surprises).
pub fn validate_tag(field: &str, tag: &str) -> Result<(), ValidationError> {
    if crate::monitor::rules::is_word(tag, MAX_TAG_LEN, b"-_.:/=") {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!(
                "`{}` is not a valid tag; use 1 to {MAX_TAG_LEN} letters, digits, `-`, `_`, `.`, `:`, `/` or `=`",
                tag.escape_debug()
            ),
        ))
    }
}

/// A list of tags: each valid, none twice, at most `max`.
pub fn validate_tags(field: &str, tags: &[String], max: usize) -> Result<(), ValidationError> {
    if tags.len() > max {
        return Err(ValidationError::new(
            field,
            format!("at most {max} tags, got {}", tags.len()),
        ));
    }
    for (i, tag) in tags.iter().enumerate() {
        validate_tag(field, tag)?;
        if tags[..i].contains(tag) {
            return Err(ValidationError::new(
                field,
                format!("`{tag}` is listed twice"),
            ));
        }
    }
    Ok(())
}

/// `POST /api/v1/monitors/pause` and `…/resume`: the monitors carrying `tag`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TagSelection {
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._:/=-]{1,64}$"))]
    pub tag: String,
}

impl TagSelection {
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_tag("tag", &self.tag)
    }
}

/// What a pause or resume by tag did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaggedChange {
    pub tag: String,
    /// The monitors carrying the tag.
    pub matched: u64,
    /// Those this request changed (the others were already paused, or running).
    pub changed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn tags_read_as_operators_write_them() {
        validate_tags(
            "tags",
            &tags(&["team:db", "env=prod", "k8s/ns", "a.b_c-d"]),
            20,
        )
        .unwrap();
        for bad in ["", "two words", "émoji", "a,b", "x?y", &"t".repeat(65)] {
            let err = validate_tags("tags", &tags(&[bad]), 20).unwrap_err();
            assert_eq!(err.field, "tags", "{bad}");
        }
    }

    #[test]
    fn a_tag_twice_or_too_many_are_refused() {
        let err = validate_tags("tags", &tags(&["a", "b", "a"]), 20).unwrap_err();
        assert!(err.message.contains("twice"), "{}", err.message);
        let many: Vec<String> = (0..21).map(|i| format!("t{i}")).collect();
        let err = validate_tags("tags", &many, 20).unwrap_err();
        assert!(err.message.contains("at most 20"), "{}", err.message);
    }
}
