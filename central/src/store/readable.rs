//! The one rule for a read of many rows when one of them does not read as its domain object
//! (only a hand-edited database, or a newer replica's value, has such a row): it is left out,
//! with an error in the log naming the row and its column, so that one bad row never stops
//! placement, alerting or a list for every other one. A read of that one object fails with
//! the same error instead; reads that must not leave anything out (what a poller is sent) use
//! `TryFrom` over every row and fail. Owns no SQL.

/// The rows that read as `T`, each one that does not logged as `what` (`"monitor"`, …) and
/// left out.
pub(super) fn readable<R, T>(what: &str, rows: Vec<R>) -> Vec<T>
where
    T: TryFrom<R, Error = anyhow::Error>,
{
    rows.into_iter()
        .filter_map(|row| kept(what, T::try_from(row)))
        .collect()
}

/// One object of a read of many, or `None` (logged as `what`) if its row does not read.
pub(super) fn kept<T>(what: &str, read: anyhow::Result<T>) -> Option<T> {
    read.inspect_err(|e| tracing::error!("a {what} left out of a read: {e:#}"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::readable;

    struct Even(u32);

    impl TryFrom<u32> for Even {
        type Error = anyhow::Error;
        fn try_from(n: u32) -> anyhow::Result<Self> {
            anyhow::ensure!(n.is_multiple_of(2), "{n} is odd");
            Ok(Even(n))
        }
    }

    #[test]
    fn a_row_that_does_not_read_is_left_out_and_the_others_kept_in_order() {
        let read: Vec<Even> = readable("number", vec![4, 3, 2, 7, 0]);
        assert_eq!(read.iter().map(|e| e.0).collect::<Vec<_>>(), [4, 2, 0]);
    }
}
