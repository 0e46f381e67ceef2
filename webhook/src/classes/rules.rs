//! The rules a class sets on a shell's spec, each denial naming the class, the field, the rule
//! and what the class allows. Pure; run beside the operator's own rules (the outer bounds), with
//! the same ratcheting on update: a field the update leaves alone is not held to a class that
//! tightened since.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use myownshell_api::class::effective;
use myownshell_api::quantity::parse;
use myownshell_api::{MyOwnShellClassSpec, MyOwnShellSpec, ResourceList};
use myownshell_runtime::time::{format_duration, parse_duration, plus};

use myownshell_api::image_pattern as pattern;

use crate::admission::problem::Problem;

/// A class's rules, with its name for the messages.
pub struct ClassRules<'a> {
    /// The class's name.
    pub name: &'a str,
    /// Its spec.
    pub spec: &'a MyOwnShellClassSpec,
}

impl ClassRules<'_> {
    fn whose(&self, field: &str) -> String {
        format!("MyOwnShellClass {:?}'s spec.{field}", self.name)
    }

    /// Every rule `shell` breaks at `now`.
    pub fn check(&self, shell: &MyOwnShellSpec, now: Timestamp) -> Vec<Problem> {
        let mut problems = Vec::new();
        self.image(shell, &mut problems);
        self.resources(shell, &mut problems);
        if let (Some(max), Some(size)) = (self.spec.max_size, shell.size)
            && size > max
        {
            let rule = format!("must be at most {max} ({}), got {size}", self.whose("maxSize"));
            problems.push(Problem::new("size", "spec.size", rule));
        }
        self.lifetime(shell, now, &mut problems);
        self.home(shell, &mut problems);
        let required = self.spec.recording.as_ref().and_then(|r| r.required) == Some(true);
        if required && shell.record_sessions != Some(true) {
            let rule = format!(
                "must be true: {} records every gateway session of its shells, got {:?}",
                self.whose("recording.required"),
                shell.record_sessions
            );
            problems.push(Problem::new("recordSessions", "spec.recordSessions", rule));
        }
        problems.into_iter().map(Problem::of_class).collect()
    }

    /// The image `shell` runs: its own, else the class's default, else the operator's.
    pub fn image_of<'s>(&'s self, shell: &'s MyOwnShellSpec) -> &'s str {
        effective::image(shell, Some(self.spec))
    }

    fn image(&self, shell: &MyOwnShellSpec, problems: &mut Vec<Problem>) {
        let Some(allowed) = self.spec.images.as_ref().and_then(|i| i.allowed.as_ref()) else { return };
        let image = self.image_of(shell);
        if allowed.is_empty() {
            let rule = format!(
                "{} is empty: the class allows no image, so no shell of it can run (ask its administrators)",
                self.whose("images.allowed")
            );
            problems.push(Problem::new("image", "spec.image", rule));
        } else if !pattern::any_matches(allowed, image) {
            let rule = format!(
                "must be one of the images {} allows ({}), got {image:?}",
                self.whose("images.allowed"),
                allowed.join(", ")
            );
            problems.push(Problem::new("image", "spec.image", rule));
        }
    }

    fn resources(&self, shell: &MyOwnShellSpec, problems: &mut Vec<Problem>) {
        let Some(max) = self.spec.resources.as_ref().and_then(|r| r.max.as_ref()) else { return };
        // Its own, else the class's default, else the operator's.
        let resources = effective::resources(shell, Some(self.spec));
        for (kind, list) in [("requests", resources.requests.as_ref()), ("limits", resources.limits.as_ref())] {
            self.within(kind, list, max, problems);
        }
    }

    fn within(&self, kind: &str, list: Option<&ResourceList>, max: &ResourceList, problems: &mut Vec<Problem>) {
        for (resource, bound) in max {
            let Ok(bound_q) = parse(&bound.0) else { continue };
            // Written only for a problem: this runs at every review of a shell of a class.
            let field = || format!("spec.resources.{kind}[{resource}]");
            match list.and_then(|l| l.get(resource)) {
                // An unset limit is no limit at all; an unset request is zero.
                None if kind == "limits" => {
                    let rule = format!(
                        "must be set, at most {} ({})",
                        bound.0,
                        self.whose(&format!("resources.max[{resource}]"))
                    );
                    problems.push(Problem::new("resources", field(), rule));
                }
                None => {}
                Some(value) if parse(&value.0).is_ok_and(|v| v.millis() > bound_q.millis()) => {
                    let rule = format!(
                        "must be at most {} ({}), got {:?}",
                        bound.0,
                        self.whose(&format!("resources.max[{resource}]")),
                        value.0
                    );
                    problems.push(Problem::new("resources", field(), rule));
                }
                Some(_) => {}
            }
        }
    }

    fn duration_of(text: Option<&String>) -> Option<Duration> {
        text.and_then(|t| parse_duration(t).ok())
    }

    fn lifetime(&self, shell: &MyOwnShellSpec, now: Timestamp, problems: &mut Vec<Problem>) {
        let Some(class) = &self.spec.lifetime else { return };
        let lifetime = shell.lifetime.clone().unwrap_or_default();
        let caps = [
            (
                "idleTimeout",
                Self::duration_of(class.max_idle_timeout.as_ref()),
                "lifetime.maxIdleTimeout",
                lifetime.idle_timeout.as_ref(),
            ),
            (
                "maxRunTime",
                Self::duration_of(class.max_run_time.as_ref()),
                "lifetime.maxRunTime",
                lifetime.max_run_time.as_ref(),
            ),
        ];
        for (field, cap, whose, value) in caps {
            let Some(cap) = cap else { continue };
            let field_path = format!("spec.lifetime.{field}");
            match value.map(|v| (v, parse_duration(v))) {
                None => {
                    let rule = format!("must be set, at most {} ({})", format_duration(cap), self.whose(whose));
                    problems.push(Problem::new("lifetime", field_path, rule));
                }
                Some((text, Ok(d))) if d > cap => {
                    let rule =
                        format!("must be at most {} ({}), got {text:?}", format_duration(cap), self.whose(whose));
                    problems.push(Problem::new("lifetime", field_path, rule));
                }
                // Unreadable durations are the operator's rules to name.
                Some(_) => {}
            }
        }
        if let (Some(reach), Some(until)) = (Self::duration_of(class.max_extension.as_ref()), &lifetime.extended_until)
        {
            let latest = plus(now, reach);
            if until.0 > latest {
                let rule = format!(
                    "must be at most {} from now ({latest}, {}), got {}",
                    format_duration(reach),
                    self.whose("lifetime.maxExtension"),
                    until.0
                );
                problems.push(Problem::new("lifetime", "spec.lifetime.extendedUntil", rule));
            }
        }
    }

    fn home(&self, shell: &MyOwnShellSpec, problems: &mut Vec<Problem>) {
        let (Some(class), Some(home)) = (&self.spec.home, &shell.home) else { return };
        if let (Some(max), Some(size)) = (&class.max_size, &home.size)
            && let (Ok(max_q), Ok(size_q)) = (parse(&max.0), parse(&size.0))
            && size_q.millis() > max_q.millis()
        {
            let rule = format!("must be at most {} ({}), got {:?}", max.0, self.whose("home.maxSize"), size.0);
            problems.push(Problem::new("home", "spec.home.size", rule));
        }
        if let Some(allowed) = &class.storage_class_names {
            let named = home.storage_class_name.as_deref();
            if !named.is_some_and(|n| allowed.iter().any(|a| a == n)) {
                let rule = format!(
                    "must be one of the StorageClasses {} allows ({}), got {named:?}",
                    self.whose("home.storageClassNames"),
                    allowed.join(", ")
                );
                problems.push(Problem::new("home", "spec.home.storageClassName", rule));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use myownshell_api::{
        ClassHome, ClassImages, ClassLifetime, ClassRecording, ClassResources, Home, Lifetime, ShellResources,
    };

    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity(s.into())
    }

    fn class() -> MyOwnShellClassSpec {
        MyOwnShellClassSpec {
            images: Some(ClassImages {
                allowed: Some(vec!["busybox:1.37.0".into(), "registry.example.com/tools/*".into()]),
                default: Some("busybox:1.37.0".into()),
            }),
            resources: Some(ClassResources {
                default: None,
                max: Some(BTreeMap::from([("cpu".into(), q("500m")), ("memory".into(), q("256Mi"))])),
            }),
            max_size: Some(2),
            lifetime: Some(ClassLifetime {
                max_idle_timeout: Some("4h".into()),
                max_run_time: Some("8h".into()),
                max_extension: Some("2h".into()),
                ..ClassLifetime::default()
            }),
            home: Some(ClassHome {
                max_size: Some(q("5Gi")),
                storage_class_names: Some(vec!["fast".into()]),
                ..ClassHome::default()
            }),
            recording: Some(ClassRecording { required: Some(true) }),
            ..MyOwnShellClassSpec::default()
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap_or_default()
    }

    /// A spec that fits [`class`].
    fn fits() -> MyOwnShellSpec {
        let list = |cpu: &str, memory: &str| BTreeMap::from([("cpu".into(), q(cpu)), ("memory".into(), q(memory))]);
        MyOwnShellSpec {
            image: Some("registry.example.com/tools/shell:1".into()),
            size: Some(1),
            resources: Some(ShellResources {
                requests: Some(list("10m", "16Mi")),
                limits: Some(list("500m", "256Mi")),
            }),
            lifetime: Some(Lifetime {
                idle_timeout: Some("1h".into()),
                max_run_time: Some("8h".into()),
                extended_until: Some(Time(plus(now(), Duration::from_secs(3600)))),
                ..Lifetime::default()
            }),
            record_sessions: Some(true),
            ..MyOwnShellSpec::default()
        }
    }

    #[test]
    fn a_class_names_itself_the_field_and_what_it_allows() {
        type Case = (&'static str, fn(&mut MyOwnShellSpec), &'static [&'static str]);
        // (what, how the fitting spec is changed, the fields refused; every message names the class)
        let cases: &[Case] = &[
            ("fits", |_| {}, &[]),
            ("an image not in the list", |s| s.image = Some("busybox:1.36".into()), &["spec.image"]),
            ("no image: the operator's default must be allowed too", |s| s.image = None, &[]),
            ("too many pods", |s| s.size = Some(3), &["spec.size"]),
            (
                "a limit above the class's",
                |s| {
                    s.resources.as_mut().and_then(|r| r.limits.as_mut()).map(|l| l.insert("cpu".into(), q("1")));
                },
                &["spec.resources.limits[cpu]"],
            ),
            ("no resources: the operator's, within the class", |s| s.resources = None, &[]),
            (
                "limits left out: unbounded",
                |s| s.resources.as_mut().map(|r| r.limits = None).unwrap_or_default(),
                &["spec.resources.limits[cpu]", "spec.resources.limits[memory]"],
            ),
            (
                "an idle timeout past the cap",
                |s| s.lifetime.as_mut().map(|l| l.idle_timeout = Some("5h".into())).unwrap_or_default(),
                &["spec.lifetime.idleTimeout"],
            ),
            (
                "no lifetime: the caps must be set",
                |s| s.lifetime = None,
                &["spec.lifetime.idleTimeout", "spec.lifetime.maxRunTime"],
            ),
            (
                "an extension too far",
                |s| {
                    s.lifetime
                        .as_mut()
                        .map(|l| l.extended_until = Some(Time(plus(now(), Duration::from_secs(3 * 3600)))))
                        .unwrap_or_default()
                },
                &["spec.lifetime.extendedUntil"],
            ),
            ("recording turned off", |s| s.record_sessions = Some(false), &["spec.recordSessions"]),
            (
                "a home too big, of another StorageClass",
                |s| {
                    s.home =
                        Some(Home { size: Some(q("10Gi")), storage_class_name: Some("slow".into()), on_delete: None })
                },
                &["spec.home.size", "spec.home.storageClassName"],
            ),
        ];
        let class = class();
        let rules = ClassRules { name: "small", spec: &class };
        for (what, change, want) in cases {
            let mut spec = fits();
            change(&mut spec);
            let problems = rules.check(&spec, now());
            let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
            assert_eq!(fields, *want, "{what}: {problems:?}");
            for p in &problems {
                assert!(p.message.contains("MyOwnShellClass \"small\"'s spec.") && p.of_class, "{what}: {p}");
            }
        }
        let image = rules.check(&MyOwnShellSpec { image: Some("x:1".into()), ..fits() }, now());
        assert!(
            image[0].message.contains("(busybox:1.37.0, registry.example.com/tools/*), got \"x:1\""),
            "{}",
            image[0]
        );
    }

    #[test]
    fn a_class_that_allows_no_image_says_so() {
        let class = MyOwnShellClassSpec {
            images: Some(ClassImages { allowed: Some(vec![]), default: None }),
            ..MyOwnShellClassSpec::default()
        };
        let problems = ClassRules { name: "closed", spec: &class }.check(&MyOwnShellSpec::default(), now());
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.contains("allows no image"), "{}", problems[0]);
        let open = MyOwnShellClassSpec::default();
        assert!(
            ClassRules { name: "open", spec: &open }.check(&fits(), now()).is_empty(),
            "an empty class sets no rule"
        );
    }
}
