//! Keyset pagination: how a page's position is written on the wire and read back (`Cursor`),
//! the one statement every list by creation reads its pages with (`by_creation`), and a page
//! of domain objects with where the next one starts (`Paged`).

use sqlx::any::AnyRow;
use sqlx::FromRow;

use super::Store;

/// Keyset pagination: the position after the last item of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub key: i64,
    pub id: String,
}

impl Cursor {
    /// Opaque on the wire: `<key>.<id>`, with `key` a signed decimal of at most 18 digits and `id`
    /// a lowercase UUID. Every string of that shape (the OpenAPI pattern
    /// `^-?[0-9]{1,18}\.[0-9a-f-]{0,36}$`) decodes, so a client can never hold a cursor that
    /// looks right and is refused.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.key, self.id)
    }

    pub fn decode(text: &str) -> Option<Cursor> {
        let (key, id) = text.split_once('.')?;
        let digits = key.strip_prefix('-').unwrap_or(key);
        let key_ok = (1..=18).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit());
        let id_ok = id.len() <= 36
            && id
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f' | b'-'));
        if !(key_ok && id_ok) {
            return None;
        }
        Some(Cursor {
            key: key.parse().ok()?,
            id: id.to_string(),
        })
    }

    /// Start of the first page.
    pub fn start() -> Cursor {
        Cursor::before_key(i64::MIN)
    }

    /// Just before every row whose key is `key` (ids sort after the empty string).
    pub fn before_key(key: i64) -> Cursor {
        Cursor {
            key,
            id: String::new(),
        }
    }
}

/// A page of objects read from rows, and where the next page starts. The next page is decided
/// by the rows read, not the objects made of them: a row left out of the objects
/// (`readable`: it does not read) must not end a list early, hiding every row after it.
#[derive(Debug)]
pub struct Paged<T> {
    pub items: Vec<T>,
    /// After the page's last row, when the page was full (there may be more); `None` at the
    /// end.
    pub next: Option<Cursor>,
}

impl<T> Paged<T> {
    /// The objects of a page of at most `limit` `rows` (those that do not read left out,
    /// logged as `what`), with `cursor_of` the last row's position.
    pub(super) fn of<R>(
        what: &str,
        rows: Vec<R>,
        limit: u32,
        cursor_of: impl Fn(&R) -> Cursor,
    ) -> Self
    where
        T: TryFrom<R, Error = anyhow::Error>,
    {
        let next = (rows.len() == limit as usize)
            .then(|| rows.last().map(cursor_of))
            .flatten();
        Paged {
            items: super::readable::readable(what, rows),
            next,
        }
    }
}

/// `SELECT {columns} FROM {table} WHERE {also} …` the rows created after the cursor, oldest
/// first, `$1` to `$3` being the cursor's key and id and the page's size; a caller's own
/// conditions go in `also` (each followed by `AND`), with parameters from `$4` on.
pub(super) fn by_creation(columns: &str, table: &str, also: &str) -> String {
    format!(
        "SELECT {columns} FROM {table} \
         WHERE {also} (created_at > $1 OR (created_at = $1 AND id > $2)) \
         ORDER BY created_at, id LIMIT $3"
    )
}

impl Store {
    /// A page of a whole table's rows by creation (`by_creation` with no condition).
    pub(super) async fn page_by_creation<T>(
        &self,
        columns: &str,
        table: &str,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Vec<T>>
    where
        T: for<'r> FromRow<'r, AnyRow> + Send + Unpin,
    {
        Ok(sqlx::query_as(&by_creation(columns, table, ""))
            .bind(after.key)
            .bind(&after.id)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::Cursor;

    #[test]
    fn what_encode_writes_decodes_and_nothing_else_does() {
        let cursor = Cursor {
            key: -1_764_000_000_000,
            id: "0f9e8d7c-6b5a-4f3e-9d2c-1b0a99887766".into(),
        };
        assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));
        for text in ["999999999999999999.", "-5.abc", "0."] {
            assert!(Cursor::decode(text).is_some(), "{text}");
        }
        for text in [
            "",
            ".",
            "x.",
            "+5.a",
            "5",
            "1234567890123456789.a",
            "5.A",
            "5.a.b",
            "5. ",
            "5.0123456789abcdef0123456789abcdef01234",
        ] {
            assert_eq!(Cursor::decode(text), None, "{text}");
        }
    }
}
