//! The home in the shell's pod: the claim mounted as `$HOME`, seeded once from the image, and a
//! Deployment that never has two pods on one ReadWriteOnce volume.

use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{EnvVar, PersistentVolumeClaimVolumeSource, Volume, VolumeMount};
use myownshell_api::defaults::HOME_DIR;

/// The home's volume in the pod.
pub const HOME_VOLUME: &str = "home";
/// The container that seeds an empty home from the image, before the shell starts.
pub const SEED_CONTAINER: &str = "seed-home";
/// Where the seed container sees the home volume (the image's own `HOME_DIR` stays visible).
const SEED_MOUNT: &str = "/myownshell/home";

/// The seed: the image's `HOME_DIR` copied into the volume only when the volume holds nothing
/// but a file system's `lost+found`, so a user's files are never written over (a copy on every
/// start is what wiped users' homes in cloudtty). `cp -R`, not `-a`: the shell runs as a user
/// that cannot give files away, and the copies are its own. A failed copy is said in the
/// container's log and does not keep the shell from starting.
fn seed_script() -> String {
    format!(
        "set -u; if [ -d {HOME_DIR} ] && [ -z \"$(ls -A {SEED_MOUNT} | grep -v '^lost+found$')\" ]; then \
         cp -R {HOME_DIR}/. {SEED_MOUNT}/ && echo 'seeded the home from the image' || echo 'seeding the home failed' >&2; fi"
    )
}

/// The strategy of a shell with a home: the old pod goes before the new one comes.
pub fn recreate() -> Option<DeploymentStrategy> {
    Some(DeploymentStrategy { type_: Some("Recreate".to_owned()), rolling_update: None })
}

/// Mount the claim `claim` as `$HOME` in `spec`'s shell container (`shell_container`, its
/// first), seed it first, and roll by `Recreate`: a RollingUpdate's new pod would wait for the
/// volume the old one holds (Multi-Attach), for ever on network storage.
pub fn mount(spec: &mut DeploymentSpec, claim: &str) {
    spec.strategy = recreate();
    let Some(pod) = spec.template.spec.as_mut() else { return };
    pod.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: HOME_VOLUME.to_owned(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.to_owned(),
            read_only: None,
        }),
        ..Volume::default()
    });
    // The volume's files belong to the shell's group (volumes that can, such as block devices
    // with a file system, are given to it; local directories are open to all already), checked
    // at the root only, so a large home does not slow each start.
    if let Some(security) = pod.security_context.as_mut() {
        security.fs_group = security.run_as_group;
        security.fs_group_change_policy = Some("OnRootMismatch".to_owned());
    }
    let Some(shell) = pod.containers.first_mut() else { return };
    for var in shell.env.iter_mut().flatten().filter(|v| v.name == "HOME") {
        var.value = Some(HOME_DIR.to_owned());
    }
    let mount = |path: &str| VolumeMount {
        name: HOME_VOLUME.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    };
    shell.volume_mounts.get_or_insert_with(Vec::new).push(mount(HOME_DIR));
    let mut seed = shell.clone();
    seed.name = SEED_CONTAINER.to_owned();
    seed.command = Some(vec!["/bin/sh".to_owned(), "-c".to_owned(), seed_script()]);
    seed.args = None;
    seed.env = Some(vec![EnvVar { name: "HOME".to_owned(), value: Some("/tmp".to_owned()), value_from: None }]);
    seed.volume_mounts = Some(vec![mount(SEED_MOUNT)]);
    pod.init_containers.get_or_insert_with(Vec::new).push(seed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_copies_only_into_an_empty_home() {
        let script = seed_script();
        assert!(script.contains("-z \"$(ls -A /myownshell/home | grep -v '^lost+found$')\""), "{script}");
        assert!(script.contains("cp -R /home/shell/. /myownshell/home/"), "{script}");
        assert!(!script.contains("cp -a"), "ownership cannot be kept by a non-root user");
    }
}
