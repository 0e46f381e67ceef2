//! The fast reader of an AdmissionReview: the fields [`super::request`] names, read with the
//! [`Cursor`] in one pass; everything else is skipped (and checked to be JSON).
//!
//! It answers only for the plain shape the apiserver sends: unescaped keys and strings, objects
//! where serde would also take an array, each named field once. Anything else is [`Refused`],
//! and `decode` falls back to the serde derives, whose reading is the reference: a test checks
//! that whenever this reader answers, serde answers the same.

use super::json_cursor::{Cursor, Refused, Result, once, whole};
use super::request::{IncomingReview, Kind, Metadata, Object, Operation, RawJson, Request};

/// Read a whole body.
pub fn read(text: &str) -> Result<IncomingReview<'_>> {
    let (mut api_version, mut kind, mut request) = (None, None, None);
    whole(text, |c| {
        c.object(|c, key| match key {
            "apiVersion" => once(&mut api_version, c.string()?),
            "kind" => once(&mut kind, c.string()?),
            "request" => once(&mut request, c.nullable(read_request)?),
            _ => c.skip_value().map(drop),
        })
    })?;
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
        "subResource" => once(&mut sub_resource, c.nullable(Cursor::string)?),
        "operation" => once(&mut operation, Operation::from_name(&c.string()?).ok_or(Refused)?),
        "object" => once(&mut object, c.nullable(read_object)?),
        "oldObject" => once(&mut old_object, c.nullable(read_object)?),
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

fn read_object<'a>(c: &mut Cursor<'a>) -> Result<Object<'a>> {
    let (mut metadata, mut spec) = (None, None);
    c.object(|c, key| match key {
        "metadata" => once(&mut metadata, c.nullable(read_metadata)?),
        "spec" => once(&mut spec, c.nullable(|c| c.skip_value().map(RawJson))?),
        _ => c.skip_value().map(drop),
    })?;
    Ok(Object { metadata: metadata.flatten(), spec: spec.flatten() })
}

fn read_metadata<'a>(c: &mut Cursor<'a>) -> Result<Metadata<'a>> {
    let (mut finalizers, mut deletion_timestamp) = (None, None);
    c.object(|c, key| match key {
        "finalizers" => once(&mut finalizers, c.nullable(Cursor::strings)?),
        // Only whether it is set matters; serde skips it just the same.
        "deletionTimestamp" => once(&mut deletion_timestamp, c.is_set()?),
        _ => c.skip_value().map(drop),
    })?;
    Ok(Metadata { finalizers: finalizers.flatten(), deletion_timestamp: deletion_timestamp.unwrap_or(false) })
}
