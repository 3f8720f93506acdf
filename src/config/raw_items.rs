//! Reading the config's YAML one item at a time: a field that does not fit is reported at
//! its path, taken out, and the rest read again, so that every bad item and field is
//! reported, not only the first.

use super::error::ConfigError;
use serde::de::DeserializeOwned;
use serde_yaml::Value;

/// Most errors reported for one item before it is given up.
const MAX_ITEM_ERRORS: usize = 32;

/// Deserialises `value` as `T`, recording an error at `path` (plus the inner path) for
/// each field that does not fit. A bad field (unknown, or of the wrong type) is reported,
/// taken out, and the rest is deserialised again, so that one typo does not hide the
/// other fields' errors, nor the semantic checks that run on what did deserialise.
pub(super) fn item<T: DeserializeOwned>(
    mut value: Value,
    path: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<T> {
    for _ in 0..MAX_ITEM_ERRORS {
        let e = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(v) => return Some(v),
            Err(e) => e,
        };
        let segments: Vec<String> = e
            .path()
            .iter()
            .filter_map(|s| match s {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                serde_path_to_error::Segment::Seq { index } => Some(format!("[{index}]")),
                _ => None,
            })
            .collect();
        let inner = e.path().to_string();
        let mut message = strip_position(&e.into_inner().to_string());
        // Point unknown fields at the field itself, not at the item that holds it.
        let mut full = join(path, if inner == "." { "" } else { &inner });
        let unknown = unknown_field(&message).map(str::to_string);
        if let Some(name) = &unknown {
            if !full.ends_with(name.as_str()) {
                full = join(&full, name);
            }
            message = message.replace(", expected one of", "; known fields:");
        }
        errors.push(ConfigError::new(full, message));
        if !remove(&mut value, &segments, unknown.as_deref()) {
            return None;
        }
    }
    None
}

/// Takes the field at `segments` (or, for an unknown field, `unknown` inside it) out of
/// `value`; false when there is nothing to take out (a missing field: give up the item).
fn remove(value: &mut Value, segments: &[String], unknown: Option<&str>) -> bool {
    let mut node = value;
    let (parents, last) = match unknown {
        Some(name) => {
            // serde reports an unknown field at the field or at the map that holds it.
            let at_field = segments.last().is_some_and(|s| s == name);
            let parents = if at_field {
                &segments[..segments.len() - 1]
            } else {
                segments
            };
            (parents, name)
        }
        None => match segments.split_last() {
            Some((last, parents)) => (parents, last.as_str()),
            None => return false,
        },
    };
    for s in parents {
        let next = match s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            Some(i) => i.parse::<usize>().ok().and_then(|i| node.get_mut(i)),
            None => node.get_mut(s.as_str()),
        };
        match next {
            Some(n) => node = n,
            None => return false,
        }
    }
    match node.as_mapping_mut() {
        Some(map) => map.remove(last).is_some(),
        None => false,
    }
}

/// serde_yaml appends "at line L column C" to some messages; the report already gives
/// the position of the field, so it is said once.
pub(super) fn strip_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) if message[i..].contains(" column ") => message[..i].to_string(),
        _ => message.to_string(),
    }
}

fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

fn join(parent: &str, child: &str) -> String {
    match (parent.is_empty(), child.is_empty()) {
        (_, true) => parent.to_string(),
        (true, false) => child.to_string(),
        (false, false) if child.starts_with('[') => format!("{parent}{child}"),
        _ => format!("{parent}.{child}"),
    }
}

/// Deserialises each item of a YAML list; a missing list is empty.
pub(super) fn list<T: DeserializeOwned>(
    value: Option<Value>,
    path: &str,
    errors: &mut Vec<ConfigError>,
) -> Vec<Option<T>> {
    match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Sequence(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| item(v, &format!("{path}[{i}]"), errors))
            .collect(),
        Some(_) => {
            errors.push(ConfigError::new(path, "must be a list"));
            Vec::new()
        }
    }
}
