//! Kubernetes Events (`events.k8s.io/v1`) as every binary writes them: one new Event per
//! occurrence, named so that any object gets its Events.
//!
//! kube's `Recorder` names an Event `<object name>.<16 hex digits>`, which the apiserver refuses
//! for an object name longer than 236 characters (an Event's name may have 253): such objects
//! got no Events at all. [`event_name`] cuts the object's name to fit, as client-go does since
//! kubernetes#129790 (the Event names its object in `regarding`, not by its own name).

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};

/// The longest name an object may have (a DNS subdomain), an Event's included.
const MAX_NAME: usize = 253;
/// The events.k8s.io API refuses notes longer than 1 kB.
pub const MAX_NOTE_BYTES: usize = 1024;

/// An Event's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something that went as it should.
    Normal,
    /// Something a person should look at.
    Warning,
}

impl EventType {
    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Who writes the Events: a controller name and this replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reporter {
    /// `reportingController`, e.g. `myownshell-webhook`.
    pub controller: String,
    /// `reportingInstance`: the pod (`$POD_NAME`), else the controller's name.
    pub instance: String,
}

impl Reporter {
    /// The reporter `controller`, this replica named by `$POD_NAME` where the manifests set it.
    pub fn new(controller: &str) -> Self {
        let instance =
            std::env::var("POD_NAME").ok().filter(|n| !n.is_empty()).unwrap_or_else(|| controller.to_owned());
        Self { controller: controller.to_owned(), instance }
    }
}

/// One occurrence to report.
#[derive(Debug, Clone, PartialEq)]
pub struct Occurrence {
    /// The object it is about.
    pub regarding: ObjectReference,
    /// A second object it involves (say the pod someone connected to).
    pub related: Option<ObjectReference>,
    /// Normal or Warning.
    pub type_: EventType,
    /// CamelCase reason (`myownshell_api::names::reasons`).
    pub reason: &'static str,
    /// What was done, CamelCase (`Exec`, `ApplyDeployment`).
    pub action: &'static str,
    /// For people; cut to [`MAX_NOTE_BYTES`].
    pub note: String,
}

/// `text` cut to at most `max` bytes on a character boundary, marked with `…` when cut.
pub fn truncate(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
    text
}

/// The name of an Event about `object` made at `now`: `<object>.<nanoseconds in hex>`, the
/// object's name cut so that the whole fits in 253 characters.
pub fn event_name(object: &str, now: Timestamp) -> String {
    let suffix = format!(".{:x}", now.as_nanosecond());
    let keep = MAX_NAME - suffix.len();
    let mut head = object.to_owned();
    if head.len() > keep {
        let mut end = keep;
        while !head.is_char_boundary(end) {
            end -= 1;
        }
        head.truncate(end);
        // A name may not end in a dot or a dash before the suffix's dot.
        while head.ends_with(['.', '-']) {
            head.pop();
        }
    }
    head + &suffix
}

/// The Event for `occurrence`, reported by `reporter` at `now`.
pub fn event(occurrence: Occurrence, reporter: &Reporter, now: Timestamp) -> Event {
    let object = occurrence.regarding.name.clone().unwrap_or_else(|| reporter.controller.clone());
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(&object, now)),
            namespace: occurrence.regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        action: Some(occurrence.action.to_owned()),
        reason: Some(occurrence.reason.to_owned()),
        note: Some(truncate(occurrence.note, MAX_NOTE_BYTES)),
        type_: Some(occurrence.type_.as_str().to_owned()),
        event_time: Some(MicroTime(now)),
        regarding: Some(occurrence.regarding),
        related: occurrence.related,
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(reporter.instance.clone()),
        ..Event::default()
    }
}

/// Write the Event for `occurrence` (in the namespace of the object it is about).
pub async fn publish(client: &kube::Client, occurrence: Occurrence, reporter: &Reporter) -> Result<(), kube::Error> {
    let namespace = occurrence.regarding.namespace.clone().unwrap_or_else(|| "default".to_owned());
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    api.create(&PostParams::default(), &event(occurrence, reporter, Timestamp::now())).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_fit_the_api_limit() {
        let cases = [("short", 10, "short"), ("exactly10!", 10, "exactly10!"), ("0123456789abc", 10, "0123456…")];
        for (text, max, want) in cases {
            assert_eq!(truncate(text.to_owned(), max), want);
        }
        let long = "é".repeat(2000);
        let cut = truncate(long, MAX_NOTE_BYTES);
        assert!(cut.len() <= MAX_NOTE_BYTES && cut.ends_with('…'), "{}", cut.len());
    }

    #[test]
    fn any_object_gets_a_valid_event_name() {
        let now = Timestamp::from_nanosecond(1_700_000_000_123_456_789).unwrap();
        let suffix = format!(".{:x}", 1_700_000_000_123_456_789i128);
        assert_eq!(event_name("web", now), format!("web{suffix}"));
        for len in [236, 237, 240, 253] {
            let name = event_name(&"n".repeat(len), now);
            assert!(name.len() <= 253, "{len}: {}", name.len());
            assert!(name.ends_with(&suffix));
        }
        let cut = event_name(&format!("{}-x", "a".repeat(235)), now);
        assert!(!cut.contains("-."), "{cut}");
    }
}
