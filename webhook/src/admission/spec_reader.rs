//! The fast reader of a `MyOwnShell` spec (the raw JSON [`super::request::Object`] keeps): the
//! [`Spec`] the validating webhook checks and the [`SpecFields`] the mutating one fills in.
//!
//! Like [`super::review_reader`] it answers only for the plain shape (unescaped strings,
//! quantities written as strings, each field once, `size` a plain integer) and refuses the rest,
//! which `Object::spec` and `Object::spec_fields` then read with serde, the reference; a
//! differential test holds the two to the same answers.

use std::borrow::Cow;

use super::json_cursor::{Cursor, Result, once, whole};
use super::request::{QuantityText, ResourceList, Resources, Spec, SpecFields};

/// The spec in `text` (a JSON object).
pub fn spec(text: &str) -> Result<Spec<'_>> {
    whole(text, |c| {
        let (mut size, mut image, mut command, mut resources) = (None, None, None, None);
        c.object(|c, key| match key {
            "size" => once(&mut size, c.nullable(Cursor::int32)?),
            "image" => once(&mut image, c.nullable(Cursor::string)?),
            "command" => once(&mut command, c.nullable(Cursor::strings)?),
            "resources" => once(&mut resources, c.nullable(read_resources)?),
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
            once(slot, c.is_set()?)
        })?;
        let set = |field: Option<bool>| field.unwrap_or(false);
        Ok(SpecFields { size: set(size), image: set(image), command: set(command), resources: set(resources) })
    })
}

fn read_resources<'a>(c: &mut Cursor<'a>) -> Result<Resources<'a>> {
    let (mut requests, mut limits) = (None, None);
    c.object(|c, key| match key {
        "requests" => once(&mut requests, c.nullable(read_list)?),
        "limits" => once(&mut limits, c.nullable(read_list)?),
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
