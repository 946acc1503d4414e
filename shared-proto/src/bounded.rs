//! Lists whose length is checked while they are parsed, so that a body of many tiny elements
//! is refused at element `N + 1` instead of being materialised first.
//!
//! Use with `#[serde(deserialize_with = "bounded::vec::<_, _, N>")]`.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};

/// A JSON array of at most `N` elements.
pub fn vec<'de, D, T, const N: usize>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_seq(AtMost::<T, N>(PhantomData))
}

/// `null` or a JSON array of at most `N` elements.
pub fn option_vec<'de, D, T, const N: usize>(deserializer: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Wrapper<T, const N: usize>(Vec<T>);
    impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Wrapper<T, N> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            vec::<D, T, N>(deserializer).map(Wrapper)
        }
    }
    Ok(Option::<Wrapper<T, N>>::deserialize(deserializer)?.map(|w| w.0))
}

struct AtMost<T, const N: usize>(PhantomData<T>);

impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for AtMost<T, N> {
    type Value = Vec<T>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        write!(formatter, "an array of at most {N} elements")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        // The hint comes from the sender: never trust it beyond the limit.
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(N).min(1024));
        while let Some(item) = seq.next_element()? {
            if items.len() == N {
                return Err(serde::de::Error::custom(format!(
                    "more than {N} elements; send at most {N} (split larger sets)"
                )));
            }
            items.push(item);
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Doc {
        #[serde(deserialize_with = "super::vec::<_, _, 3>")]
        items: Vec<u8>,
    }

    #[test]
    fn refuses_the_element_past_the_limit_and_names_the_field() {
        let ok: Doc = serde_json::from_str(r#"{"items":[1,2,3]}"#).unwrap();
        assert_eq!(ok.items, vec![1, 2, 3]);
        let error = serde_json::from_str::<Doc>(r#"{"items":[1,2,3,4]}"#).unwrap_err();
        assert!(
            error.to_string().contains("more than 3 elements"),
            "{error}"
        );
        // The refusal comes at the fourth element: what follows is never read.
        let error =
            serde_json::from_str::<Doc>(r#"{"items":[1,2,3,4,"not even valid"#).unwrap_err();
        assert!(
            error.to_string().contains("more than 3 elements"),
            "{error}"
        );
    }
}
