//! The fast reader of an AdmissionReview: the fields [`super::request`] names, read with the
//! [`Cursor`] in one pass; everything else is skipped (and checked to be JSON).
//!
//! It answers only for the plain shape the apiserver sends: unescaped keys and strings, objects
//! where serde would also take an array, each named field once. Anything else is [`Refused`],
//! and `decode` falls back to the serde derives, whose reading is the reference: a test checks
//! that whenever this reader answers, serde answers the same.

use std::borrow::Cow;

use super::json_cursor::{Cursor, Refused, Result};
use super::request::{IncomingReview, Kind, Metadata, Object, Operation, RawJson, Request};

/// Store a field's value, refusing a second one (serde rejects a repeated field).
fn once<T>(slot: &mut Option<T>, value: T) -> Result<()> {
    match slot {
        Some(_) => Err(Refused),
        None => {
            *slot = Some(value);
            Ok(())
        }
    }
}

/// `null` as `None`, or the value `read` reads.
fn nullable<'a, T>(c: &mut Cursor<'a>, read: impl FnOnce(&mut Cursor<'a>) -> Result<T>) -> Result<Option<T>> {
    if c.null()? { Ok(None) } else { read(c).map(Some) }
}

/// Read a whole body.
pub fn read(text: &str) -> Result<IncomingReview<'_>> {
    let mut c = Cursor::new(text);
    let (mut api_version, mut kind, mut request) = (None, None, None);
    c.object(|c, key| match key {
        "apiVersion" => once(&mut api_version, c.string()?),
        "kind" => once(&mut kind, c.string()?),
        "request" => once(&mut request, nullable(c, read_request)?),
        _ => c.skip_value().map(drop),
    })?;
    if !c.at_end() {
        return Err(Refused);
    }
    Ok(IncomingReview {
        api_version: api_version.unwrap_or_default(),
        kind: kind.unwrap_or_default(),
        request: request.flatten(),
    })
}

fn read_request<'a>(c: &mut Cursor<'a>) -> Result<Request<'a>> {
    let (mut uid, mut kind, mut sub_resource, mut operation, mut object, mut old_object) =
        (None, None, None, None, None, None);
    c.object(|c, key| match key {
        "uid" => once(&mut uid, c.string()?),
        "kind" => once(&mut kind, read_kind(c)?),
        "subResource" => once(&mut sub_resource, nullable(c, Cursor::string)?),
        "operation" => once(&mut operation, read_operation(c)?),
        "object" => once(&mut object, nullable(c, read_object)?),
        "oldObject" => once(&mut old_object, nullable(c, read_object)?),
        _ => c.skip_value().map(drop),
    })?;
    Ok(Request {
        uid: uid.ok_or(Refused)?,
        kind: kind.ok_or(Refused)?,
        sub_resource: sub_resource.flatten(),
        operation: operation.ok_or(Refused)?,
        object: object.flatten(),
        old_object: old_object.flatten(),
    })
}

fn read_kind<'a>(c: &mut Cursor<'a>) -> Result<Kind<'a>> {
    let (mut group, mut version, mut kind) = (None, None, None);
    c.object(|c, key| match key {
        "group" => once(&mut group, c.string()?),
        "version" => once(&mut version, c.string()?),
        "kind" => once(&mut kind, c.string()?),
        _ => c.skip_value().map(drop),
    })?;
    Ok(Kind { group: group.unwrap_or_default(), version: version.unwrap_or_default(), kind: kind.ok_or(Refused)? })
}

fn read_operation(c: &mut Cursor<'_>) -> Result<Operation> {
    match c.string()?.as_ref() {
        "CREATE" => Ok(Operation::Create),
        "UPDATE" => Ok(Operation::Update),
        "DELETE" => Ok(Operation::Delete),
        "CONNECT" => Ok(Operation::Connect),
        _ => Err(Refused),
    }
}

fn read_object<'a>(c: &mut Cursor<'a>) -> Result<Object<'a>> {
    let (mut metadata, mut spec) = (None, None);
    c.object(|c, key| match key {
        "metadata" => once(&mut metadata, nullable(c, read_metadata)?),
        "spec" => once(&mut spec, nullable(c, |c| c.skip_value().map(RawJson))?),
        _ => c.skip_value().map(drop),
    })?;
    Ok(Object { metadata: metadata.flatten(), spec: spec.flatten() })
}

fn read_metadata<'a>(c: &mut Cursor<'a>) -> Result<Metadata<'a>> {
    let (mut finalizers, mut deletion_timestamp) = (None, None);
    c.object(|c, key| match key {
        "finalizers" => once(&mut finalizers, nullable(c, read_strings)?),
        "deletionTimestamp" => {
            // Only whether it is set matters; serde skips it just the same.
            let set = !c.null()?;
            if set {
                c.skip_value()?;
            }
            once(&mut deletion_timestamp, set)
        }
        _ => c.skip_value().map(drop),
    })?;
    Ok(Metadata { finalizers: finalizers.flatten(), deletion_timestamp: deletion_timestamp.unwrap_or(false) })
}

fn read_strings<'a>(c: &mut Cursor<'a>) -> Result<Vec<Cow<'a, str>>> {
    let mut strings = Vec::new();
    c.array(|c| {
        strings.push(c.string()?);
        Ok(())
    })?;
    Ok(strings)
}
