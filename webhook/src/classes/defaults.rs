//! What a class fills in of a new shell's spec: its default image, command, resources and
//! lifetime, its home's size and StorageClass, and recording when it requires it. As JSON Patch
//! operations, before the operator's own defaults (which then find those fields set).

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use myownshell_api::{Lifetime, MyOwnShellClassSpec, MyOwnShellSpec};
use serde_json::{Value, json};

fn add(path: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(path.iter().copied()), value })
}

/// The operations that fill what `spec` leaves unset from `class`; `spec` is filled the same
/// way, so the operator's defaults that follow see the class's values.
pub fn operations(spec: &mut MyOwnShellSpec, class: &MyOwnShellClassSpec) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    if spec.record_sessions.is_none() && class.recording.as_ref().and_then(|r| r.required) == Some(true) {
        ops.push(add(&["spec", "recordSessions"], json!(true)));
        spec.record_sessions = Some(true);
    }
    lifetime(spec, class, &mut ops);
    home(spec, class, &mut ops);
    ops
}

/// Whether `class` fills anything at all: when it does not, [`operations`] adds nothing to any
/// spec, so the mutating webhook need not read a shell's spec in full to find out.
pub fn fills_anything(class: &MyOwnShellClassSpec) -> bool {
    let recording = class.recording.as_ref().and_then(|r| r.required) == Some(true);
    let lifetime = class.lifetime.as_ref().is_some_and(|l| l.idle_timeout.is_some() || l.max_run_time.is_some());
    let home = class.home.as_ref().is_some_and(|h| {
        h.default_size.is_some() || h.storage_class_names.as_ref().is_some_and(|names| !names.is_empty())
    });
    recording || lifetime || home
}

fn lifetime(spec: &mut MyOwnShellSpec, class: &MyOwnShellClassSpec, ops: &mut Vec<PatchOperation>) {
    let Some(wanted) = &class.lifetime else { return };
    let defaults = [("idleTimeout", wanted.idle_timeout.clone()), ("maxRunTime", wanted.max_run_time.clone())];
    let lifetime = match &mut spec.lifetime {
        Some(l) => l,
        None if defaults.iter().any(|(_, v)| v.is_some()) => {
            ops.push(add(&["spec", "lifetime"], json!({})));
            spec.lifetime.insert(Lifetime::default())
        }
        None => return,
    };
    for (field, value) in defaults {
        let Some(value) = value else { continue };
        let slot = match field {
            "idleTimeout" => &mut lifetime.idle_timeout,
            _ => &mut lifetime.max_run_time,
        };
        if slot.is_none() {
            ops.push(add(&["spec", "lifetime", field], json!(value)));
            *slot = Some(value);
        }
    }
}

fn home(spec: &mut MyOwnShellSpec, class: &MyOwnShellClassSpec, ops: &mut Vec<PatchOperation>) {
    let (Some(home), Some(wanted)) = (&mut spec.home, &class.home) else { return };
    if home.size.is_none()
        && let Some(size) = wanted.default_size.clone()
    {
        ops.push(add(&["spec", "home", "size"], json!(size)));
        home.size = Some(size);
    }
    if home.storage_class_name.is_none()
        && let Some(first) = wanted.storage_class_names.as_ref().and_then(|names| names.first().cloned())
    {
        ops.push(add(&["spec", "home", "storageClassName"], json!(first)));
        home.storage_class_name = Some(first);
    }
}

#[cfg(test)]
mod tests {
    use myownshell_api::{ClassHome, ClassImages, ClassLifetime, ClassRecording, Home};

    use super::*;

    fn paths(ops: &[PatchOperation]) -> Vec<String> {
        ops.iter()
            .map(|op| match op {
                PatchOperation::Add(a) => a.path.to_string(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn class() -> MyOwnShellClassSpec {
        MyOwnShellClassSpec {
            images: Some(ClassImages { allowed: None, default: Some("tools:1".into()) }),
            command: Some(vec!["sh".into()]),
            recording: Some(ClassRecording { required: Some(true) }),
            lifetime: Some(ClassLifetime {
                idle_timeout: Some("2h".into()),
                max_run_time: Some("8h".into()),
                ..ClassLifetime::default()
            }),
            home: Some(ClassHome {
                default_size: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("2Gi".into())),
                storage_class_names: Some(vec!["fast".into(), "slow".into()]),
                ..ClassHome::default()
            }),
            ..MyOwnShellClassSpec::default()
        }
    }

    #[test]
    fn the_class_fills_only_what_is_unset() {
        // (spec, the paths added)
        type Case = (MyOwnShellSpec, Vec<&'static str>);
        let with_home = MyOwnShellSpec { home: Some(Home::default()), ..MyOwnShellSpec::default() };
        let set = MyOwnShellSpec {
            image: Some("mine:1".into()),
            command: Some(vec!["bash".into()]),
            record_sessions: Some(false),
            lifetime: Some(Lifetime { idle_timeout: Some("1h".into()), ..Lifetime::default() }),
            ..MyOwnShellSpec::default()
        };
        let cases: Vec<Case> = vec![
            (
                MyOwnShellSpec::default(),
                vec![
                    "/spec/recordSessions",
                    "/spec/lifetime",
                    "/spec/lifetime/idleTimeout",
                    "/spec/lifetime/maxRunTime",
                ],
            ),
            (set, vec!["/spec/lifetime/maxRunTime"]),
            (
                with_home,
                vec![
                    "/spec/recordSessions",
                    "/spec/lifetime",
                    "/spec/lifetime/idleTimeout",
                    "/spec/lifetime/maxRunTime",
                    "/spec/home/size",
                    "/spec/home/storageClassName",
                ],
            ),
        ];
        for (mut spec, want) in cases {
            let ops = operations(&mut spec, &class());
            assert_eq!(paths(&ops), want);
            assert_eq!(operations(&mut spec, &class()).len(), 0, "a filled spec needs nothing more");
        }
        assert!(operations(&mut MyOwnShellSpec::default(), &MyOwnShellClassSpec::default()).is_empty());
    }

    #[test]
    fn a_class_that_fills_nothing_adds_nothing_to_any_spec() {
        let full = class();
        // (class, whether it fills anything)
        let cases: Vec<(&str, MyOwnShellClassSpec, bool)> = vec![
            ("no defaults", MyOwnShellClassSpec::default(), false),
            (
                "only what the controller takes (image, command) and caps",
                MyOwnShellClassSpec {
                    images: full.images.clone(),
                    command: full.command.clone(),
                    max_size: Some(3),
                    ..MyOwnShellClassSpec::default()
                },
                false,
            ),
            (
                "recording allowed, not required",
                MyOwnShellClassSpec {
                    recording: Some(ClassRecording { required: Some(false) }),
                    ..MyOwnShellClassSpec::default()
                },
                false,
            ),
            (
                "a lifetime of caps only",
                MyOwnShellClassSpec {
                    lifetime: Some(ClassLifetime { max_idle_timeout: Some("4h".into()), ..ClassLifetime::default() }),
                    ..MyOwnShellClassSpec::default()
                },
                false,
            ),
            (
                "a home with no StorageClass named",
                MyOwnShellClassSpec {
                    home: Some(ClassHome { storage_class_names: Some(vec![]), ..ClassHome::default() }),
                    ..MyOwnShellClassSpec::default()
                },
                false,
            ),
            (
                "recording required",
                MyOwnShellClassSpec { recording: full.recording.clone(), ..MyOwnShellClassSpec::default() },
                true,
            ),
            (
                "a default idle timeout",
                MyOwnShellClassSpec {
                    lifetime: Some(ClassLifetime { idle_timeout: Some("1h".into()), ..ClassLifetime::default() }),
                    ..MyOwnShellClassSpec::default()
                },
                true,
            ),
            (
                "a default maximum run time",
                MyOwnShellClassSpec {
                    lifetime: Some(ClassLifetime { max_run_time: Some("1h".into()), ..ClassLifetime::default() }),
                    ..MyOwnShellClassSpec::default()
                },
                true,
            ),
            (
                "a home's default size",
                MyOwnShellClassSpec {
                    home: Some(ClassHome {
                        default_size: full.home.as_ref().and_then(|h| h.default_size.clone()),
                        ..ClassHome::default()
                    }),
                    ..MyOwnShellClassSpec::default()
                },
                true,
            ),
            (
                "a home's StorageClass",
                MyOwnShellClassSpec {
                    home: Some(ClassHome { storage_class_names: Some(vec!["fast".into()]), ..ClassHome::default() }),
                    ..MyOwnShellClassSpec::default()
                },
                true,
            ),
            ("everything", full, true),
        ];
        let specs =
            || [MyOwnShellSpec::default(), MyOwnShellSpec { home: Some(Home::default()), ..MyOwnShellSpec::default() }];
        for (what, class, fills) in &cases {
            assert_eq!(fills_anything(class), *fills, "{what}");
            let added: usize = specs().iter_mut().map(|spec| operations(spec, class).len()).sum();
            // What `fills_anything` says is what `operations` does, on a bare spec and on one with a home.
            assert_eq!(added > 0, *fills, "{what}: {added} operations");
        }
    }
}
