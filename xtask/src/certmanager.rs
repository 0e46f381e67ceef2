//! cert-manager for the e2e suite's cert-manager phase: its controller, webhook and cainjector
//! at [`VERSION`], built from the Go module proxy into local images, with its CRDs and install
//! manifests, in `~/.cache/myownshell/cert-manager/<version>/`; built once per machine (a
//! `.complete` stamp), never again while that is there.
//!
//! Why mains of our own: since v1.12 cert-manager's commands are modules of their own
//! (`cmd/controller/go.mod`, …) that `replace` the root module with `../../`, so the proxy
//! serves none of them, while the root module holds every library, the CRDs and the chart. A
//! throwaway module whose path lies under `github.com/cert-manager/cert-manager/` may import the
//! root module's `internal/` packages (Go's rule goes by import path), so `certmanager/*.go`
//! are small mains calling the entry points the real commands call, configured by flags only.
//! They leave out the Venafi issuer: the proxy refuses `github.com/Venafi/vcert/v5` at the
//! versions cert-manager needs ("403 not available"), so nothing may import it.
//!
//! The manifests (`certmanager/install.yaml`) are written by hand: the chart in the module
//! needs Helm to render. The CRDs are the module's own `deploy/crds/`.
//!
//! What the e2e reads from the directory [`ENV`] names: [`CRDS`], [`MANIFESTS`], and the images
//! `controller.tar`, `webhook.tar`, `cainjector.tar` (also in `MYOWNSHELL_NODE_IMAGES`, so that
//! every node has them).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use myownshell_envtest::assets;
use myownshell_envtest::node::images::{self, ImageSpec};

use crate::go::{build_with_progress, go_command, mod_download, run_go};
use crate::progress::Step;

/// The cert-manager release.
pub const VERSION: &str = "v1.21.2";
/// The variable that names the cache directory for the e2e suite.
pub const ENV: &str = "MYOWNSHELL_CERT_MANAGER";
/// The CRDs, in the cache directory.
pub const CRDS: &str = "crds.yaml";
/// Everything else cert-manager needs (namespace, RBAC, Deployments, the webhook's Service and
/// configurations), in the cache directory.
pub const MANIFESTS: &str = "cert-manager.yaml";

const MODULE: &str = "github.com/cert-manager/cert-manager";
/// Under cert-manager's own path, so that it may import cert-manager's `internal/` packages.
const BUILD_MODULE: &str = "github.com/cert-manager/cert-manager/myownshell-build";
/// Written once the images and CRDs are in place, holding what they were built from: its
/// absence, or a change of the mains, means "build".
const STAMP: &str = ".complete";
/// Each component and its main.
const COMPONENTS: [(&str, &str); 3] = [
    ("controller", include_str!("certmanager/controller.go")),
    ("webhook", include_str!("certmanager/webhook.go")),
    ("cainjector", include_str!("certmanager/cainjector.go")),
];
const INSTALL: &str = include_str!("certmanager/install.yaml");
/// Non-root, as upstream's images (the kubelet refuses root with `runAsNonRoot`).
const USER: &str = "1000:1000";

/// Where cert-manager's pieces are.
#[derive(Debug, Clone)]
pub struct CertManager {
    /// The cache directory (what [`ENV`] names).
    pub dir: PathBuf,
    /// The image archives, one per component.
    pub images: Vec<PathBuf>,
    /// The CRDs ([`CRDS`]).
    pub crds: PathBuf,
    /// The rest of the installation ([`MANIFESTS`]).
    pub manifests: PathBuf,
}

impl CertManager {
    fn at(dir: PathBuf) -> Self {
        Self {
            images: COMPONENTS.iter().map(|(c, _)| dir.join(format!("{c}.tar"))).collect(),
            crds: dir.join(CRDS),
            manifests: dir.join(MANIFESTS),
            dir,
        }
    }
}

/// The cache directory of [`VERSION`].
pub fn cache_dir() -> PathBuf {
    assets::cache_root().join("cert-manager").join(VERSION)
}

/// The name a component's image has on the nodes, as the manifests use it.
pub fn image(component: &str) -> String {
    format!("localhost/cert-manager-{component}:{VERSION}")
}

/// cert-manager's images, CRDs and manifests, built on first use.
pub fn ensure() -> anyhow::Result<CertManager> {
    let found = CertManager::at(cache_dir());
    let stamped = std::fs::read_to_string(found.dir.join(STAMP)).is_ok_and(|s| s == stamp());
    if !(stamped && found.images.iter().chain([&found.crds]).all(|p| p.is_file())) {
        let step = Step::start(format!("building cert-manager {VERSION} once (cached in {})", found.dir.display()));
        std::fs::create_dir_all(&found.dir).with_context(|| format!("creating {}", found.dir.display()))?;
        let _ = std::fs::remove_file(found.dir.join(STAMP));
        let work = build_dir();
        build_binaries(&work)?;
        build_images(&work.join("bin"), &found)?;
        copy_crds(&work, &found.crds)?;
        std::fs::write(found.dir.join(STAMP), stamp())?;
        // The images hold the binaries now.
        let _ = std::fs::remove_dir_all(work.join("bin"));
        step.done();
    }
    // Cheap, so kept in step with the source on every run rather than stamped.
    let manifests = INSTALL.replace("{{VERSION}}", VERSION);
    if std::fs::read_to_string(&found.manifests).ok().as_deref() != Some(manifests.as_str()) {
        std::fs::write(&found.manifests, manifests)
            .with_context(|| format!("writing {}", found.manifests.display()))?;
    }
    Ok(found)
}

/// The throwaway module's directory (its go.sum records what was built).
fn build_dir() -> PathBuf {
    assets::cache_root().join("cert-manager").join(format!("build-{VERSION}"))
}

fn stamp() -> String {
    // FNV-1a: stable across Rust releases, unlike std's hasher.
    let hash = COMPONENTS
        .iter()
        .flat_map(|(_, main)| main.bytes())
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("cert-manager {VERSION}\nmains {hash:016x}\n")
}

fn check_go() -> anyhow::Result<String> {
    crate::go::check_go(|| {
        format!(
            "cert-manager {VERSION} is not cached in {} and building it needs Go 1.26 or newer on PATH (its go.mod says so)",
            cache_dir().display()
        )
    })
}

/// `go build` of the three mains into `work/bin/`, statically (`CGO_ENABLED=0`, from
/// `go_command`), reporting the version as the release does.
fn build_binaries(work: &Path) -> anyhow::Result<()> {
    let go = check_go()?;
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    std::fs::write(work.join("go.mod"), format!("module {BUILD_MODULE}\n\ngo 1.26.0\n\nrequire {MODULE} {VERSION}\n"))?;
    for (component, main) in COMPONENTS {
        std::fs::create_dir_all(work.join(component))?;
        std::fs::write(work.join(component).join("main.go"), main)?;
    }
    eprintln!("{}   go mod tidy ({MODULE}@{VERSION})", crate::progress::prefix());
    run_go(work, &["mod", "tidy"])?;
    let packages: Vec<String> = COMPONENTS.iter().map(|(c, _)| format!("./{c}")).collect();
    let mut list = vec!["list", "-deps"];
    list.extend(packages.iter().map(String::as_str));
    let mut all: Vec<String> = run_go(work, &list)?.lines().map(str::to_owned).collect();
    all.sort();
    all.dedup();
    let total = all.len();

    let mut step = Step::start(format!("go build of the controller, webhook and cainjector with {go}"));
    let ldflags = format!("-s -w -X {MODULE}/pkg/util.AppVersion={VERSION} -X {MODULE}/pkg/util.AppGitState=clean");
    let _ = std::fs::remove_dir_all(work.join("bin"));
    let mut build = go_command(work);
    build.args(["build", "-v", "-trimpath", "-ldflags", &ldflags, "-o", "bin/"]).args(&packages);
    let mut built = 0usize;
    build_with_progress(build, "go build of cert-manager", &mut step, |_| {
        built += 1;
        format!("compiled {built} of ~{total} packages")
    })?;
    step.done();
    Ok(())
}

/// One image per component: its static binary, and the host's CA bundle (for ACME servers) as
/// upstream's distroless base has one.
fn build_images(bin: &Path, found: &CertManager) -> anyhow::Result<()> {
    for ((component, _), archive) in COMPONENTS.iter().zip(&found.images) {
        let rootfs = found.dir.join(format!("rootfs-{component}"));
        let _ = std::fs::remove_dir_all(&rootfs);
        let entrypoint = format!("/cert-manager-{component}");
        std::fs::create_dir_all(&rootfs)?;
        std::fs::copy(bin.join(component), rootfs.join(&entrypoint[1..]))
            .with_context(|| format!("copying the {component} binary"))?;
        let bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
        if bundle.is_file() {
            std::fs::create_dir_all(rootfs.join("etc/ssl/certs"))?;
            std::fs::copy(bundle, rootfs.join("etc/ssl/certs/ca-certificates.crt"))?;
        }
        let spec = ImageSpec {
            name: image(component),
            user: USER.into(),
            entrypoint: vec![entrypoint],
            cmd: Vec::new(),
            env: Vec::new(),
        };
        images::build_archive(&spec, &rootfs, archive, &found.dir.join(format!("build-{component}")))
            .map_err(anyhow::Error::msg)?;
        let _ = std::fs::remove_dir_all(&rootfs);
    }
    Ok(())
}

/// `deploy/crds/*.yaml` of the module (already in the module cache after the build), as one
/// multi-document file.
fn copy_crds(work: &Path, out: &Path) -> anyhow::Result<()> {
    let module = format!("{MODULE}@{VERSION}");
    let info = mod_download(work, &module)?;
    let crds = PathBuf::from(info.dir.context("`go mod download -json` named no Dir")?).join("deploy/crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&crds)
        .with_context(|| format!("reading {}", crds.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no CRDs in {}", crds.display());
    }
    let mut text = format!("# cert-manager {VERSION}'s CRDs, from {module}/deploy/crds.\n");
    for file in files {
        let crd = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        text.push_str("---\n");
        text.push_str(crd.trim_start_matches("---\n").trim_end());
        text.push('\n');
    }
    std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifests_run_the_images_built_here() {
        let manifests = INSTALL.replace("{{VERSION}}", VERSION);
        for (component, _) in COMPONENTS {
            assert!(manifests.contains(&format!("image: {}\n", image(component))), "{component}");
        }
        assert!(!manifests.contains("{{"), "a placeholder is left");
        assert_eq!(manifests.matches("imagePullPolicy: Never").count(), COMPONENTS.len());
    }

    #[test]
    fn every_main_is_its_own_package_main() {
        for (component, main) in COMPONENTS {
            assert!(main.contains("\npackage main\n"), "{component}");
            // Venafi's packages import github.com/Venafi/vcert/v5, which the proxy refuses.
            assert!(!main.to_lowercase().contains("/venafi\""), "{component} imports a Venafi package");
        }
    }
}
