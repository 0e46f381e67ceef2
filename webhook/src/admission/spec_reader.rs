//! The fast reader of a `MyOwnShell` spec (the raw JSON [`super::request::Object`] keeps): the
//! [`Spec`] the validating webhook checks and the [`SpecFields`] the mutating one fills in.
//!
//! Like [`super::review_reader`] it answers only for the plain shape (unescaped strings,
//! quantities written as strings, each field once, `size` a plain integer) and refuses the rest,
//! which `Object::spec` and `Object::spec_fields` then read with serde, the reference; a
//! differential test holds the two to the same answers.

use std::borrow::Cow;

use super::json_cursor::{Cursor, Refused, Result};
use super::request::{QuantityText, ResourceList, Resources, Spec, SpecFields};

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

/// A whole text that is one value `read` reads.
fn whole<'a, T>(text: &'a str, read: impl FnOnce(&mut Cursor<'a>) -> Result<T>) -> Result<T> {
    let mut c = Cursor::new(text);
    let value = read(&mut c)?;
    if c.at_end() { Ok(value) } else { Err(Refused) }
}

/// The spec in `text` (a JSON object).
pub fn spec(text: &str) -> Result<Spec<'_>> {
    whole(text, |c| {
        let (mut size, mut image, mut command, mut resources) = (None, None, None, None);
        c.object(|c, key| match key {
            "size" => once(&mut size, nullable(c, Cursor::int32)?),
            "image" => once(&mut image, nullable(c, Cursor::string)?),
            "command" => once(&mut command, nullable(c, strings)?),
            "resources" => once(&mut resources, nullable(c, read_resources)?),
            _ => c.skip_value().map(drop),
        })?;
        Ok(Spec {
            size: size.flatten(),
            image: image.flatten(),
            command: command.flatten(),
            resources: resources.flatten(),
        })
    })
}

/// Which fields the spec in `text` (a JSON object) sets, whatever their values.
pub fn spec_fields(text: &str) -> Result<SpecFields> {
    whole(text, |c| {
        let (mut size, mut image, mut command, mut resources) = (None, None, None, None);
        c.object(|c, key| {
            let slot = match key {
                "size" => &mut size,
                "image" => &mut image,
                "command" => &mut command,
                "resources" => &mut resources,
                _ => return c.skip_value().map(drop),
            };
            let set = !c.null()?;
            if set {
                c.skip_value()?;
            }
            once(slot, set)
        })?;
        let set = |field: Option<bool>| field.unwrap_or(false);
        Ok(SpecFields { size: set(size), image: set(image), command: set(command), resources: set(resources) })
    })
}

fn strings<'a>(c: &mut Cursor<'a>) -> Result<Vec<Cow<'a, str>>> {
    let mut strings = Vec::new();
    c.array(|c| {
        strings.push(c.string()?);
        Ok(())
    })?;
    Ok(strings)
}

fn read_resources<'a>(c: &mut Cursor<'a>) -> Result<Resources<'a>> {
    let (mut requests, mut limits) = (None, None);
    c.object(|c, key| match key {
        "requests" => once(&mut requests, nullable(c, read_list)?),
        "limits" => once(&mut limits, nullable(c, read_list)?),
        _ => c.skip_value().map(drop),
    })?;
    Ok(Resources { requests: requests.flatten(), limits: limits.flatten() })
}

fn read_list<'a>(c: &mut Cursor<'a>) -> Result<ResourceList<'a>> {
    let mut entries = Vec::with_capacity(4);
    c.object(|c, name| {
        entries.push((Cow::Borrowed(name), QuantityText(c.string()?)));
        Ok(())
    })?;
    Ok(ResourceList::from_entries(entries))
}
