//! The session holder in every shell pod (`myownshell-session`, issue 39's durable terminals):
//! an init container copies the static binary from the operator's image into an emptyDir, which
//! the shell's container mounts read-only at `/opt/myownshell`; the shell's command is wrapped in
//! `myownshell-session serve -- …`, which runs it as pid 1's child and keeps every terminal's PTY,
//! processes and recent output behind a socket in `/run` (an emptyDir: the root file system is
//! read-only, and the holder makes its folder there itself, 0700, which it could not on a
//! volume's own root). Nothing is asked of the shell's image. Pure: the reconcile applies what
//! this builds.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, EmptyDirVolumeSource, PodSpec, ResourceRequirements, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use myownshell_api::MyOwnShellClassSpec;
use myownshell_session::{BINARY, INSTALL_DIR};

/// The init container that installs the holder.
pub const INSTALL_CONTAINER: &str = "install-session";
/// The holder binary's path in the operator's image (its binaries are at `/`).
pub const IMAGE_BINARY: &str = "/myownshell-session";
const BIN_VOLUME: &str = "myownshell-session";
const RUN_VOLUME: &str = "myownshell-run";
const RUN_DIR: &str = "/run";

/// What the operator's flags say of the holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSettings {
    /// The image holding the holder (`--session-image`: the operator's own).
    pub image: String,
    /// How long a terminal nobody is attached to lives on, where its class says nothing
    /// (`--session-detached-timeout`).
    pub detached_timeout: Duration,
    /// The most terminals one pod keeps (`--max-sessions-per-pod`).
    pub max_sessions: u32,
}

/// The detached timeout of a shell of `class`: the class's, where it gives one that reads,
/// else the operator's.
pub fn detached_timeout(settings: &SessionSettings, class: Option<&MyOwnShellClassSpec>) -> Duration {
    class
        .and_then(|c| c.sessions.as_ref())
        .and_then(|s| s.detached_timeout.as_deref())
        .and_then(|t| myownshell_runtime::time::parse_duration(t).ok())
        .unwrap_or(settings.detached_timeout)
}

/// Put the holder into `pod`, around its first container (the shell's).
pub fn add(pod: &mut PodSpec, settings: &SessionSettings, class: Option<&MyOwnShellClassSpec>) {
    let Some(shell) = pod.containers.first_mut() else { return };
    let timeout = myownshell_runtime::time::format_duration(detached_timeout(settings, class));
    let mut command = vec![
        BINARY.to_owned(),
        "serve".to_owned(),
        format!("--detached-ttl={timeout}"),
        format!("--max-sessions={}", settings.max_sessions),
        "--".to_owned(),
    ];
    command.extend(shell.command.take().unwrap_or_default());
    shell.command = Some(command);
    let mounts = shell.volume_mounts.get_or_insert_with(Vec::new);
    mounts.push(VolumeMount {
        name: BIN_VOLUME.to_owned(),
        mount_path: INSTALL_DIR.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    });
    mounts.push(VolumeMount { name: RUN_VOLUME.to_owned(), mount_path: RUN_DIR.to_owned(), ..VolumeMount::default() });
    let install = install_container(shell, settings);
    pod.init_containers.get_or_insert_with(Vec::new).insert(0, install);
    let volumes = pod.volumes.get_or_insert_with(Vec::new);
    for name in [BIN_VOLUME, RUN_VOLUME] {
        volumes.push(Volume {
            name: name.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        });
    }
}

/// The init container: the shell container's security (non-root, no capabilities, read-only
/// root), the operator's image, `myownshell-session install` into the emptyDir; small and
/// brief (a copy of a few MiB).
/// The shell's own command, the holder's wrapping taken off: what the user (or the class)
/// asked to run, for telling a user's change from the operator's.
pub fn own_command(shell: &Container) -> Option<&[String]> {
    let command = shell.command.as_deref()?;
    if command.first().map(String::as_str) != Some(BINARY) {
        return Some(command);
    }
    let after = command.iter().position(|a| a == "--").map_or(command.len(), |i| i + 1);
    Some(&command[after..])
}

/// The shell's mounts that are not the holder's: what the user (or the class) mounts.
pub fn own_mounts(shell: &Container) -> Vec<&VolumeMount> {
    shell.volume_mounts.iter().flatten().filter(|m| m.name != BIN_VOLUME && m.name != RUN_VOLUME).collect()
}

fn install_container(shell: &Container, settings: &SessionSettings) -> Container {
    let quantity = |q: &str| Quantity(q.to_owned());
    let small = [("cpu".to_owned(), quantity("50m")), ("memory".to_owned(), quantity("32Mi"))];
    Container {
        name: INSTALL_CONTAINER.to_owned(),
        image: Some(settings.image.clone()),
        command: Some(vec![IMAGE_BINARY.to_owned(), "install".to_owned(), BINARY.to_owned()]),
        volume_mounts: Some(vec![VolumeMount {
            name: BIN_VOLUME.to_owned(),
            mount_path: INSTALL_DIR.to_owned(),
            ..VolumeMount::default()
        }]),
        resources: Some(ResourceRequirements {
            requests: Some(small.clone().into()),
            limits: Some(small.into()),
            ..ResourceRequirements::default()
        }),
        security_context: shell.security_context.clone(),
        ..Container::default()
    }
}

#[cfg(test)]
mod tests {
    use myownshell_api::ClassSessions;

    use super::*;

    fn settings() -> SessionSettings {
        SessionSettings {
            image: "ghcr.io/myownshell/myownshell:1".into(),
            detached_timeout: Duration::from_secs(3600),
            max_sessions: 16,
        }
    }

    fn pod() -> PodSpec {
        PodSpec {
            containers: vec![Container {
                name: "shell".into(),
                command: Some(vec!["sh".into(), "-c".into(), "sleep infinity".into()]),
                ..Container::default()
            }],
            ..PodSpec::default()
        }
    }

    #[test]
    fn the_holder_wraps_the_command_and_is_installed_first() {
        let mut p = pod();
        p.init_containers = Some(vec![Container { name: "seed-home".into(), ..Container::default() }]);
        add(&mut p, &settings(), None);
        let shell = &p.containers[0];
        assert_eq!(
            shell.command.as_deref().unwrap(),
            [BINARY, "serve", "--detached-ttl=1h", "--max-sessions=16", "--", "sh", "-c", "sleep infinity"]
        );
        let mounts: Vec<(&str, Option<bool>)> =
            shell.volume_mounts.iter().flatten().map(|m| (m.mount_path.as_str(), m.read_only)).collect();
        assert_eq!(mounts, [(INSTALL_DIR, Some(true)), (RUN_DIR, None)]);
        let init: Vec<&str> = p.init_containers.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(init, [INSTALL_CONTAINER, "seed-home"], "installed before anything else runs");
        let install = &p.init_containers.as_ref().unwrap()[0];
        assert_eq!(install.command.as_deref().unwrap(), [IMAGE_BINARY, "install", BINARY]);
        assert_eq!(install.image.as_deref(), Some("ghcr.io/myownshell/myownshell:1"));
        let volumes: Vec<&str> = p.volumes.iter().flatten().map(|v| v.name.as_str()).collect();
        assert_eq!(volumes, [BIN_VOLUME, RUN_VOLUME]);
    }

    #[test]
    fn a_class_sets_how_long_a_detached_terminal_lives() {
        let with = |t: &str| MyOwnShellClassSpec {
            sessions: Some(ClassSessions { detached_timeout: Some(t.into()) }),
            ..MyOwnShellClassSpec::default()
        };
        let cases = [
            ("no class", None, Duration::from_secs(3600)),
            ("a class that says nothing", Some(MyOwnShellClassSpec::default()), Duration::from_secs(3600)),
            ("ten minutes", Some(with("10m")), Duration::from_secs(600)),
            ("unreadable: the operator's", Some(with("soon")), Duration::from_secs(3600)),
        ];
        for (what, class, want) in cases {
            assert_eq!(detached_timeout(&settings(), class.as_ref()), want, "{what}");
        }
        let mut p = pod();
        add(&mut p, &settings(), Some(&with("90m")));
        assert!(p.containers[0].command.as_ref().unwrap().contains(&"--detached-ttl=1h30m".to_owned()));
    }
}
