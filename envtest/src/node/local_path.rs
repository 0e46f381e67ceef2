//! A real dynamic provisioner for the test cluster: Rancher's local-path-provisioner, built from
//! the Go module proxy by `cargo xtask` (like kwok) into [`cache_dir`] with the manifest its
//! module publishes (`deploy/local-path-storage.yaml`, not copied into this repository), and
//! run as a pod on the node like on any small cluster ([`install`]).
//!
//! What the harness changes in that manifest ([`manifest`]): the image is the one built here
//! from the cached binary and never pulled; the helper pod (which makes and removes a volume's
//! directory on its node) runs the shell image's busybox; every node keeps its volumes in a
//! directory of its own under the cluster's run directory (the nodes share the host's file
//! system, so the default `/opt/local-path-provisioner` would be one directory for all of them,
//! and a volume would not stay with its node); and its StorageClass is the cluster's default,
//! so a claim with no class gets it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::Cluster;
use super::images::{ImageSpec, build_archive};
use crate::assets::{cache_root, is_executable};
use crate::wait::eventually;

/// The local-path-provisioner release built and run.
pub const VERSION: &str = "v0.0.30";
/// A directory holding [`BINARY`] and [`MANIFEST`], instead of [`cache_dir`].
pub const ENV: &str = "MYOWNSHELL_LOCAL_PATH";
/// File name of the binary.
pub const BINARY: &str = "local-path-provisioner";
/// File name of the module's manifest, written next to the binary.
pub const MANIFEST: &str = "local-path-storage.yaml";
/// The image the harness builds from the binary.
pub const IMAGE: &str = "localhost/local-path-provisioner:v0.0.30";
/// Its StorageClass, the cluster's default.
pub const STORAGE_CLASS: &str = "local-path";
/// The image of the helper pods: the shell image (busybox), already on every node.
const HELPER_IMAGE: &str = myownshell_api::defaults::IMAGE;
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// `~/.cache/myownshell/local-path-provisioner/<version>/`.
pub fn cache_dir() -> PathBuf {
    cache_root().join("local-path-provisioner").join(VERSION)
}

/// The directory it is taken from: [`ENV`] if set, else [`cache_dir`].
pub fn dir() -> PathBuf {
    std::env::var_os(ENV).filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(cache_dir)
}

/// The binary and the manifest, or what is missing and how to get it.
pub fn locate() -> Result<(PathBuf, PathBuf), String> {
    let dir = dir();
    let (binary, manifest) = (dir.join(BINARY), dir.join(MANIFEST));
    if is_executable(&binary) && manifest.is_file() {
        Ok((binary, manifest))
    } else {
        Err(format!(
            "local-path-provisioner {VERSION} or its {MANIFEST} not found in {}; `cargo xtask test` and \
             `cargo xtask e2e` build them, or set {ENV} to a directory holding both",
            dir.display()
        ))
    }
}

/// The module's manifest (multi-document YAML) as one JSON `List`, changed as the module doc
/// says; `volumes` names each node's directory for its volumes.
pub fn manifest(upstream: &str, volumes: &[(String, PathBuf)]) -> Result<Value, String> {
    let mut items: Vec<Value> = serde_saphyr::from_multiple(upstream).map_err(|e| format!("{MANIFEST}: {e}"))?;
    items.retain(|item| !item.is_null());
    for item in &mut items {
        match item["kind"].as_str().unwrap_or_default() {
            "Deployment" => {
                let container = &mut item["spec"]["template"]["spec"]["containers"][0];
                container["image"] = json!(IMAGE);
                container["imagePullPolicy"] = json!("Never");
            }
            "StorageClass" => {
                item["metadata"]["annotations"] = json!({"storageclass.kubernetes.io/is-default-class": "true"});
            }
            "ConfigMap" => {
                let paths: Vec<Value> = volumes
                    .iter()
                    .map(|(node, dir)| json!({"node": node, "paths": [dir.display().to_string()]}))
                    .collect();
                item["data"]["config.json"] = json!(json!({"nodePathMap": paths}).to_string());
                let helper = item["data"]["helperPod.yaml"].as_str().ok_or("the ConfigMap has no helperPod.yaml")?;
                let mut pod: Value = serde_saphyr::from_str(helper).map_err(|e| format!("helperPod.yaml: {e}"))?;
                pod["spec"]["containers"][0]["image"] = json!(HELPER_IMAGE);
                pod["spec"]["containers"][0]["imagePullPolicy"] = json!("Never");
                item["data"]["helperPod.yaml"] = json!(pod.to_string());
            }
            _ => {}
        }
    }
    Ok(json!({"apiVersion": "v1", "kind": "List", "items": items}))
}

/// Build the provisioner's image archive into `out` from `binary` (static: nothing else).
pub fn build_image(binary: &Path, out: &Path, work: &Path) -> Result<(), String> {
    let rootfs = work.join("local-path-rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    // Static (built with CGO_ENABLED=0): no libraries to copy with it.
    let bin = rootfs.join("usr/bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("creating {}: {e}", bin.display()))?;
    std::fs::copy(binary, bin.join(BINARY)).map_err(|e| format!("copying {}: {e}", binary.display()))?;
    let spec = ImageSpec {
        name: IMAGE.into(),
        user: "0:0".into(),
        entrypoint: Vec::new(),
        cmd: vec![BINARY.into()],
        env: vec!["PATH=/usr/bin".into()],
    };
    let result = build_archive(&spec, &rootfs, out, &work.join("local-path-build"));
    let _ = std::fs::remove_dir_all(&rootfs);
    result
}

/// Run the provisioner on `cluster` (its image on every node, its manifest applied) and wait
/// until it is ready; each node's volumes go to `<run dir>/local-path/<node>`.
pub async fn install(cluster: &Cluster) -> Result<(), String> {
    let (binary, manifest_path) = locate()?;
    let run_dir = cluster.control_plane().layout().dir.clone();
    let archive = run_dir.join("local-path-provisioner.tar");
    build_image(&binary, &archive, &run_dir.join("local-path-image"))?;
    cluster.import_image(&archive)?;
    let volumes: Vec<(String, PathBuf)> =
        cluster.node_names().into_iter().map(|n| (n.clone(), run_dir.join("local-path").join(n))).collect();
    let upstream =
        std::fs::read_to_string(&manifest_path).map_err(|e| format!("reading {}: {e}", manifest_path.display()))?;
    let list = manifest(&upstream, &volumes)?;
    let kubectl = cluster.control_plane().kubectl();
    kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&list.to_string())).await?.ok()?;
    let rollout = ["rollout", "status", "-n", "local-path-storage", "deployment/local-path-provisioner"];
    eventually("the local-path-provisioner ready", READY_TIMEOUT, || async {
        let out = kubectl.run(&[&rollout[..], &["--timeout=10s"]].concat()).await?;
        if out.success { Ok(()) } else { Err(out.stderr) }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    const UPSTREAM: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: local-path-storage
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: local-path-provisioner
spec:
  template:
    spec:
      containers:
        - name: local-path-provisioner
          image: rancher/local-path-provisioner:v0.0.30
          imagePullPolicy: IfNotPresent
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
provisioner: rancher.io/local-path
---
kind: ConfigMap
apiVersion: v1
metadata:
  name: local-path-config
data:
  config.json: |-
    {\"nodePathMap\":[{\"node\":\"DEFAULT_PATH_FOR_NON_LISTED_NODES\",\"paths\":[\"/opt/local-path-provisioner\"]}]}
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata:
      name: helper-pod
    spec:
      containers:
      - name: helper-pod
        image: busybox
        imagePullPolicy: IfNotPresent
";

    #[test]
    fn the_manifest_runs_here_keeps_volumes_per_node_and_is_the_default_class() {
        let volumes = [("n1".to_owned(), PathBuf::from("/run/x/n1")), ("n2".to_owned(), PathBuf::from("/run/x/n2"))];
        let list = manifest(UPSTREAM, &volumes).unwrap();
        let items = list["items"].as_array().unwrap();
        let kind = |k: &str| items.iter().find(|i| i["kind"] == k).unwrap();
        let container = &kind("Deployment")["spec"]["template"]["spec"]["containers"][0];
        assert_eq!((container["image"].as_str(), container["imagePullPolicy"].as_str()), (Some(IMAGE), Some("Never")));
        assert_eq!(
            kind("StorageClass")["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"],
            "true"
        );
        let data = &kind("ConfigMap")["data"];
        let config: Value = serde_json::from_str(data["config.json"].as_str().unwrap()).unwrap();
        assert_eq!(
            config,
            json!({"nodePathMap": [{"node": "n1", "paths": ["/run/x/n1"]}, {"node": "n2", "paths": ["/run/x/n2"]}]})
        );
        let helper: Value = serde_json::from_str(data["helperPod.yaml"].as_str().unwrap()).unwrap();
        assert_eq!(helper["spec"]["containers"][0]["image"], HELPER_IMAGE);
        assert_eq!(items.len(), 4, "nothing dropped but empty documents");
    }
}
