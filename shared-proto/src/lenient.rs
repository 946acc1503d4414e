//! JSON numbers read as JSON Schema reads them. JSON has one number type, so `3.0` is the
//! integer 3 to JSON Schema and to most clients' encoders; serde refuses it for an integer
//! field. Callers parse once as usual and only a text refused for that reason is parsed a
//! second time here, with integral numbers rewritten as integers: the common case costs one
//! parse, and no other input is read differently.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Whether serde's error says a float was found where an integer was wanted.
pub fn is_float_for_integer(error: &str) -> bool {
    error.contains("invalid type: floating point")
}

/// Parses `bytes` with every integral float an `i64`/`u64` holds exactly read as an integer.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    let mut value: Value = serde_json::from_slice(bytes)?;
    integral_floats_to_integers(&mut value);
    serde_json::from_value(value)
}

/// Parses one JSON text: as serde does, and once more through [`from_slice`] when serde
/// refused it only for an integral float. The error is the first parse's.
pub fn from_str<T: DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    match serde_json::from_str(text) {
        Err(error) if is_float_for_integer(&error.to_string()) => {
            from_slice(text.as_bytes()).map_err(|_| error)
        }
        other => other,
    }
}

/// Reads a JSON value (a monitor's free-form `settings`) as [`from_str`] reads a text.
pub fn from_value<T: DeserializeOwned>(mut value: Value) -> serde_json::Result<T> {
    match T::deserialize(&value) {
        Err(error) if is_float_for_integer(&error.to_string()) => {
            integral_floats_to_integers(&mut value);
            serde_json::from_value(value).map_err(|_| error)
        }
        other => other,
    }
}

/// Rewrites every float with no fractional part that an `i64`/`u64` holds exactly as an integer.
fn integral_floats_to_integers(value: &mut Value) {
    // 2^53: past it a float no longer stands for one integer.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    match value {
        Value::Number(number) => {
            if let Some(float) = number.as_f64().filter(|_| number.is_f64()) {
                if float.fract() == 0.0 && float.abs() <= EXACT {
                    // In range by the check above, so the cast is exact.
                    *number = serde_json::Number::from(float as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        Value::Object(fields) => fields.values_mut().for_each(integral_floats_to_integers),
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

#[cfg(test)]
mod tests {
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Counts {
        count: u64,
    }

    #[test]
    fn an_integral_float_is_an_integer_and_the_first_error_stands() {
        assert_eq!(
            super::from_str::<Counts>(r#"{"count": 65535.0}"#)
                .unwrap()
                .count,
            65535
        );
        let error = super::from_str::<Counts>(r#"{"count": 1.5}"#).unwrap_err();
        assert!(
            error.to_string().contains("floating point `1.5`"),
            "{error}"
        );
    }
}
