//! A review's raw `spec` read by serde: into `myownshell_api::MyOwnShellSpec` (the one spec
//! definition), into the `Scale` spec of `kubectl scale`, or only for which fields it sets.
//!
//! A spec that does not decode is read a second time with `serde_path_to_error`, so that the
//! answer names the field and what it must be (`spec.size: must be a 32-bit integer (invalid
//! type: string "three", expected i32)`) instead of a bare serde message. Only bad input pays
//! for that second reading.

use std::borrow::Cow;

use myownshell_api::MyOwnShellSpec;
use serde::de::{DeserializeOwned, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_path_to_error::Segment;

/// `Scale.spec` (`autoscaling/v1`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ScaleSpec {
    /// Kept as JSON so that a value out of `int32` range is reported, not a parse error.
    #[serde(default)]
    pub replicas: Option<serde_json::Number>,
}

/// Which fields of a spec are set (present and not null), by name; their values are not read.
/// One bit per field of [`FIELDS`], the only names asked about: a set of names would copy each
/// name out of the body on every mutation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetFields(u32);

/// The top-level fields of a `MyOwnShell` spec, as the CRD names them (a test holds them to it).
pub(crate) const FIELDS: [&str; 14] = [
    "approvals",
    "className",
    "command",
    "home",
    "image",
    "lifetime",
    "owner",
    "ownerUID",
    "recordSessions",
    "resources",
    "sharedWith",
    "size",
    "stopped",
    "updateRequestedAt",
];

/// The bit of `field` in [`SetFields`], if it is a spec field.
fn bit(field: &str) -> Option<u32> {
    FIELDS.iter().position(|f| *f == field).map(|i| 1 << i)
}

impl SetFields {
    /// Whether the spec sets `field` (a JSON name, e.g. `size`).
    pub fn contains(&self, field: &str) -> bool {
        bit(field).is_some_and(|bit| self.0 & bit != 0)
    }
}

impl<'de> Deserialize<'de> for SetFields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// A key: the bit of a spec field, `None` for any other name.
        struct Key(Option<u32>);
        impl<'de> Deserialize<'de> for Key {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_str(KeyVisitor)
            }
        }
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Key, E> {
                Ok(Key(bit(name)))
            }
        }
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = SetFields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SetFields, A::Error> {
                let mut set = 0;
                while let Some(Key(bit)) = map.next_key()? {
                    let value: Option<IgnoredAny> = map.next_value()?;
                    // The last of a repeated key wins, as it does for the apiserver.
                    match (bit, value) {
                        (Some(bit), Some(_)) => set |= bit,
                        (Some(bit), None) => set &= !bit,
                        (None, _) => {}
                    }
                }
                Ok(SetFields(set))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// The `MyOwnShell` spec in `raw`.
pub(crate) fn shell_spec(raw: &str) -> Result<MyOwnShellSpec, String> {
    must_be_object(raw)?;
    read(raw, shell_rule)
}

/// The `Scale` spec in `raw`.
pub(super) fn scale_spec(raw: &str) -> Result<ScaleSpec, String> {
    read(raw, |path| (path == ["replicas"]).then_some("a 32-bit integer"))
}

/// Which fields the spec in `raw` sets, whatever their values.
pub(super) fn set_fields(raw: &str) -> Result<SetFields, String> {
    must_be_object(raw)?;
    serde_json::from_str(raw).map_err(|e| format!("spec does not decode: {}", without_position(&e)))
}

/// `spec.className` alone, borrowed when it has no escapes.
#[derive(Deserialize)]
struct ClassNameOnly<'a> {
    #[serde(rename = "className", default, borrow)]
    class_name: Option<Cow<'a, str>>,
}

/// The class the spec in `raw` names (`None`: none, or null), its other fields not read.
pub(super) fn class_name(raw: &str) -> Result<Option<Cow<'_, str>>, String> {
    must_be_object(raw)?;
    let only: ClassNameOnly<'_> =
        serde_json::from_str(raw).map_err(|e| format!("spec does not decode: {}", without_position(&e)))?;
    Ok(only.class_name)
}

/// serde reads a struct from a JSON array too; a spec must be an object.
fn must_be_object(raw: &str) -> Result<(), String> {
    if raw.starts_with('{') {
        return Ok(());
    }
    let kind = match raw.bytes().next() {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    };
    Err(format!("spec does not decode: expected an object, got {kind}"))
}

/// What the field at a path (keys and indexes below `spec`) must be, in the words of the CRD
/// schema, where serde would only say `expected i32` or `expected Quantity`. A test holds the
/// top-level entries to the fields of the CRD.
fn shell_rule(path: &[&str]) -> Option<&'static str> {
    Some(match path {
        ["size"] => "a 32-bit integer",
        ["image"] => "a string",
        ["command"] => "a list of strings",
        ["command", _] => "a string",
        ["resources"] => "an object with requests and limits",
        ["resources", "requests" | "limits"] => "a map of resource names to quantities",
        ["resources", "requests" | "limits", _] => "a quantity such as \"250m\" or 1",
        ["owner" | "ownerUID" | "className"] => "a string",
        ["sharedWith"] => "an object with users and groups",
        ["sharedWith", "users" | "groups"] => "a list of names",
        ["sharedWith", "users" | "groups", _] => "a string",
        ["lifetime"] => "an object with idleTimeout, maxRunTime, warnBefore and deletePausedAfter",
        ["lifetime", "extendedUntil" | "restartedAt"] => "a time such as \"2026-01-01T00:00:00Z\"",
        ["lifetime", _] => "a duration such as \"30m\" or \"1h30m\"",
        ["stopped" | "recordSessions"] => "true or false",
        ["updateRequestedAt"] => "a time such as \"2026-01-01T00:00:00Z\"",
        ["home"] => "an object with size, storageClassName and onDelete",
        ["home", "size"] => "a quantity such as \"1Gi\"",
        ["home", "storageClassName"] => "a string",
        ["home", "onDelete"] => "Delete or Retain",
        ["approvals"] => "a list of approvals",
        ["approvals", _] => "an object with decision and reason",
        ["approvals", _, "decision"] => "Approve or Reject",
        ["approvals", _, "by" | "via" | "reason"] => "a string",
        ["approvals", _, "at"] => "a time such as \"2026-01-01T00:00:00Z\"",
        _ => return None,
    })
}

/// `raw` as `T`; when it does not decode, the field that does not and, where `rule` knows it,
/// what that field must be.
fn read<T: DeserializeOwned>(raw: &str, rule: fn(&[&str]) -> Option<&'static str>) -> Result<T, String> {
    // The common case pays nothing for path tracking.
    let plain = match serde_json::from_str(raw) {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    let mut reader = serde_json::Deserializer::from_str(raw);
    let Err(tracked) = serde_path_to_error::deserialize::<_, T>(&mut reader) else {
        // Only trailing input fails the plain reading alone, which a raw JSON value never has.
        return Err(format!("spec does not decode: {}", without_position(&plain)));
    };
    let steps: Vec<Cow<'_, str>> = tracked
        .path()
        .iter()
        .map(|segment| match segment {
            Segment::Seq { index } => Cow::Owned(index.to_string()),
            Segment::Map { key } => Cow::Borrowed(key.as_str()),
            Segment::Enum { variant } => Cow::Borrowed(variant.as_str()),
            Segment::Unknown => Cow::Borrowed("?"),
        })
        .collect();
    let steps: Vec<&str> = steps.iter().map(Cow::as_ref).collect();
    let field = field_name(tracked.path());
    let detail = without_position(tracked.inner());
    Err(match rule(&steps) {
        Some(rule) => format!("spec does not decode: {field}: must be {rule} ({detail})"),
        None => format!("spec does not decode: {field}: {detail}"),
    })
}

/// The field as the validation rules name it: `spec.command[0]`, `spec.resources.limits[cpu]`.
fn field_name(path: &serde_path_to_error::Path) -> String {
    let mut name = String::from("spec");
    let mut keys: Vec<&str> = Vec::new();
    for segment in path {
        match segment {
            Segment::Seq { index } => name.push_str(&format!("[{index}]")),
            // A resource list's entries are resource names, written in brackets.
            Segment::Map { key } if matches!(keys.as_slice(), ["resources", "requests" | "limits"]) => {
                name.push_str(&format!("[{key}]"));
            }
            Segment::Map { key: part } | Segment::Enum { variant: part } => {
                name.push('.');
                name.push_str(part);
                keys.push(part);
            }
            Segment::Unknown => name.push_str(".?"),
        }
    }
    name
}

/// serde_json's message without its ` at line L column C`: a position in the spec's own text,
/// which the apiserver wrote and the user never saw.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&position) {
        Some(message) => message.to_owned(),
        None => text,
    }
}
