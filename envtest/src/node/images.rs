//! Images without a registry: OCI archives built with `umoci` from files on this machine and
//! imported into a node's containerd with `ctr images import`. Nothing is ever pulled.
//!
//! - the pause image: Kubernetes' own `pause.c` (from the module cache of the kube-apiserver
//!   build), compiled statically; under the name the CRI plugin is configured with;
//! - the shell image: Debian's `busybox-static` with its applets linked, under the default image
//!   name of a `MyOwnShell` (`busybox:1.37.0`, see `myownshell_api::defaults::IMAGE`);
//! - the operator image: the workspace's binaries (the dev build for the e2e suite, the release
//!   build for the node bench) with the shared libraries they link, and the static session
//!   holder every shell pod copies from it, user and entrypoint as in the Dockerfile (see
//!   ARCHITECTURE.md).

use std::path::{Path, PathBuf};

use super::sandbox::run;

/// The operator image's name on a node: what `config/overlays/local` points the manifests at.
pub const OPERATOR_IMAGE: &str = "localhost/myownshell:local";
/// The operator image's archive name in an images directory.
pub const OPERATOR_ARCHIVE: &str = "operator.tar";

/// What goes into one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSpec {
    /// The full reference, e.g. `docker.io/library/busybox:1.37.0`.
    pub name: String,
    /// `USER`, e.g. `65532:65532`.
    pub user: String,
    /// `ENTRYPOINT`.
    pub entrypoint: Vec<String>,
    /// `CMD`.
    pub cmd: Vec<String>,
    /// `ENV`.
    pub env: Vec<String>,
}

/// Build `rootfs` (a directory) into the OCI archive `out`, using `work` as scratch space.
pub fn build_archive(spec: &ImageSpec, rootfs: &Path, out: &Path, work: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work).map_err(|e| format!("creating {}: {e}", work.display()))?;
    let layout = work.join("layout");
    let bundle = work.join("bundle");
    let image = format!("{}:{}", layout.display(), spec.name);
    run("umoci", &["init", "--layout", &layout.display().to_string()])?;
    run("umoci", &["new", "--image", &image])?;
    run("umoci", &["unpack", "--image", &image, &bundle.display().to_string()])?;
    let source = format!("{}/.", rootfs.display());
    run("cp", &["-a", &source, &bundle.join("rootfs").display().to_string()])?;
    run("umoci", &["repack", "--image", &image, &bundle.display().to_string()])?;
    let mut config = vec!["config".to_owned(), "--image".into(), image.clone(), format!("--config.user={}", spec.user)];
    config.extend(spec.entrypoint.iter().map(|a| format!("--config.entrypoint={a}")));
    config.extend(spec.cmd.iter().map(|a| format!("--config.cmd={a}")));
    config.extend(spec.env.iter().map(|e| format!("--config.env={e}")));
    run("umoci", &config.iter().map(String::as_str).collect::<Vec<_>>())?;
    run("umoci", &["gc", "--layout", &layout.display().to_string()])?;
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    let partial = out.with_extension("partial");
    run("tar", &["-C", &layout.display().to_string(), "-cf", &partial.display().to_string(), "."])?;
    std::fs::rename(&partial, out).map_err(|e| format!("writing {}: {e}", out.display()))?;
    let _ = std::fs::remove_dir_all(work);
    Ok(())
}

/// Import an archive into the node's containerd (the `k8s.io` namespace, where the CRI plugin
/// looks).
pub fn import(containerd_socket: &Path, archive: &Path) -> Result<(), String> {
    let socket = containerd_socket.display().to_string();
    run("ctr", &["-a", &socket, "-n", "k8s.io", "images", "import", &archive.display().to_string()]).map(drop)
}

fn write(path: &Path, contents: &str) -> Result<(), String> {
    std::fs::write(path, contents).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn mkdir(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path).map_err(|e| format!("creating {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", path.display()))
}

/// `/etc/passwd` and `/etc/group` with root, nobody (the shells' 65534) and nonroot (65532,
/// the operator's user, as in distroless).
fn users(rootfs: &Path) -> Result<(), String> {
    mkdir(&rootfs.join("etc"), 0o755)?;
    write(
        &rootfs.join("etc/passwd"),
        "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/tmp:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
    )?;
    write(&rootfs.join("etc/group"), "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")
}

/// The shell image's files: busybox and a link per applet in `/bin`, a `/tmp`.
pub fn shell_rootfs(rootfs: &Path, busybox: &Path) -> Result<(), String> {
    mkdir(&rootfs.join("bin"), 0o755)?;
    mkdir(&rootfs.join("tmp"), 0o1777)?;
    users(rootfs)?;
    std::fs::copy(busybox, rootfs.join("bin/busybox")).map_err(|e| format!("copying {}: {e}", busybox.display()))?;
    let applets = run(&busybox.display().to_string(), &["--list"])?;
    for applet in applets.lines().map(str::trim).filter(|a| !a.is_empty() && *a != "busybox") {
        let link = rootfs.join("bin").join(applet);
        if !link.exists() {
            std::os::unix::fs::symlink("busybox", &link).map_err(|e| format!("linking {}: {e}", link.display()))?;
        }
    }
    Ok(())
}

/// The shell image's spec under `name` (the default image of a MyOwnShell).
pub fn shell_spec(name: &str) -> ImageSpec {
    ImageSpec {
        name: name.to_owned(),
        user: "0:0".into(),
        entrypoint: Vec::new(),
        cmd: vec!["sh".into()],
        env: vec!["PATH=/bin".into()],
    }
}

/// The pause image's files: the static `pause` binary.
pub fn pause_rootfs(rootfs: &Path, pause: &Path) -> Result<(), String> {
    mkdir(rootfs, 0o755)?;
    std::fs::copy(pause, rootfs.join("pause")).map_err(|e| format!("copying {}: {e}", pause.display()))?;
    Ok(())
}

/// The pause image's spec (user 65535 and entrypoint `/pause`, as upstream's).
pub fn pause_spec() -> ImageSpec {
    ImageSpec {
        name: super::config::PAUSE_IMAGE.into(),
        user: "65535:65535".into(),
        entrypoint: vec!["/pause".into()],
        cmd: Vec::new(),
        env: Vec::new(),
    }
}

/// Shared libraries `binary` loads, as `ldd` resolves them (absolute paths).
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, String> {
    let out = run("ldd", &[&binary.display().to_string()])?;
    Ok(out
        .lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

/// Copy `binary` into the image at `dest` (e.g. `/myownshell-controller`), with the shared
/// libraries it links at the paths this machine's loader found them (what a distroless `cc`
/// base image would provide).
pub fn add_binary(rootfs: &Path, binary: &Path, dest: &str) -> Result<(), String> {
    let target = rootfs.join(dest.trim_start_matches('/'));
    if let Some(parent) = target.parent() {
        mkdir(parent, 0o755)?;
    }
    std::fs::copy(binary, &target).map_err(|e| format!("copying {}: {e}", binary.display()))?;
    for library in shared_libraries(binary)? {
        let target = rootfs.join(library.strip_prefix("/").unwrap_or(&library));
        if let Some(parent) = target.parent() {
            mkdir(parent, 0o755)?;
        }
        // Copies the file a symlink points at, under the name the loader asks for.
        std::fs::copy(&library, &target).map_err(|e| format!("copying {}: {e}", library.display()))?;
    }
    Ok(())
}

/// The operator image's files: the binaries in `/` with their libraries, and distroless's
/// users.
pub fn operator_rootfs(rootfs: &Path, binaries: &[PathBuf]) -> Result<(), String> {
    mkdir(rootfs, 0o755)?;
    mkdir(&rootfs.join("tmp"), 0o1777)?;
    users(rootfs)?;
    for binary in binaries {
        let name = binary.file_name().ok_or_else(|| format!("{} has no file name", binary.display()))?;
        add_binary(rootfs, binary, &format!("/{}", name.to_string_lossy()))?;
    }
    Ok(())
}

/// Where the operator image holds the gateway page's JavaScript (the gateway's default
/// `--assets-dir` is its `node_modules`).
pub const GATEWAY_ASSETS: &str = "/usr/share/myownshell-gateway/node_modules/@xterm";

/// Copy the directory `from` (files and folders, no links) into the image at `dest`.
pub fn add_tree(rootfs: &Path, from: &Path, dest: &str) -> Result<(), String> {
    let target = rootfs.join(dest.trim_start_matches('/'));
    mkdir_all(&target)?;
    let entries = std::fs::read_dir(from).map_err(|e| format!("reading {}: {e}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("reading {}: {e}", from.display()))?;
        let kind = entry.file_type().map_err(|e| e.to_string())?;
        let name = entry.file_name();
        let child_dest = format!("{}/{}", dest.trim_end_matches('/'), name.to_string_lossy());
        if kind.is_dir() {
            add_tree(rootfs, &entry.path(), &child_dest)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), target.join(&name))
                .map_err(|e| format!("copying {}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

fn mkdir_all(path: &Path) -> Result<(), String> {
    std::fs::create_dir_all(path).map_err(|e| format!("creating {}: {e}", path.display()))
}

/// An image for probing from inside the cluster (tests): the shell image's busybox plus
/// this machine's `curl` (busybox's own TLS client cannot talk to a rustls server).
pub const PROBE_IMAGE: &str = "localhost/myownshell-probe:local";

/// Build the probe image's archive (see [`PROBE_IMAGE`]) into `out`.
pub fn build_probe(out: &Path, work: &Path) -> Result<(), String> {
    let rootfs = work.join("probe-rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    shell_rootfs(&rootfs, Path::new("/bin/busybox"))?;
    add_binary(&rootfs, Path::new("/usr/bin/curl"), "/usr/bin/curl")?;
    let mut spec = shell_spec(PROBE_IMAGE);
    spec.env = vec!["PATH=/usr/bin:/bin".into()];
    let result = build_archive(&spec, &rootfs, out, &work.join("probe-build"));
    let _ = std::fs::remove_dir_all(&rootfs);
    result
}

/// A shell image with a home to seed (tests): the shell image plus `/home/shell/.profile`.
pub const SEEDED_IMAGE: &str = "localhost/myownshell-seeded:local";
/// What the seeded image's `/home/shell/.profile` holds.
pub const SEEDED_PROFILE: &str = "echo from-the-image\n";

/// Build the seeded image's archive (see [`SEEDED_IMAGE`]) into `out`.
pub fn build_seeded(out: &Path, work: &Path) -> Result<(), String> {
    let rootfs = work.join("seeded-rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    shell_rootfs(&rootfs, Path::new("/bin/busybox"))?;
    mkdir(&rootfs.join("home/shell"), 0o755)?;
    write(&rootfs.join("home/shell/.profile"), SEEDED_PROFILE)?;
    let result = build_archive(&shell_spec(SEEDED_IMAGE), &rootfs, out, &work.join("seeded-build"));
    let _ = std::fs::remove_dir_all(&rootfs);
    result
}

/// An image holding only the session holder (`cargo xtask dev`, whose operator runs as processes
/// on this machine, not from an image): the static `myownshell-session` at `/myownshell-session`,
/// as the operator image holds it.
pub const SESSION_IMAGE: &str = "localhost/myownshell-session:local";

/// Build the session holder's image (see [`SESSION_IMAGE`]) from the static `binary` into `out`.
pub fn build_session(binary: &Path, out: &Path, work: &Path) -> Result<(), String> {
    let rootfs = work.join("session-rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    mkdir(&rootfs, 0o755)?;
    add_binary(&rootfs, binary, "/myownshell-session")?;
    let spec = ImageSpec {
        name: SESSION_IMAGE.into(),
        user: "65532:65532".into(),
        entrypoint: vec!["/myownshell-session".into()],
        cmd: Vec::new(),
        env: Vec::new(),
    };
    let result = build_archive(&spec, &rootfs, out, &work.join("session-build"));
    let _ = std::fs::remove_dir_all(&rootfs);
    result
}

/// The operator image's spec: as the Dockerfile's final stage (user 65532, the controller as
/// entrypoint; the manifests name the binary they run).
pub fn operator_spec() -> ImageSpec {
    ImageSpec {
        name: OPERATOR_IMAGE.into(),
        user: "65532:65532".into(),
        entrypoint: vec!["/myownshell-controller".into()],
        cmd: Vec::new(),
        env: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_image_runs_as_the_dockerfile_says() {
        let dockerfile = std::fs::read_to_string(crate::assets::workspace_root().join("Dockerfile")).unwrap();
        let spec = operator_spec();
        assert!(dockerfile.contains(&format!("USER {}", spec.user)), "USER differs from the Dockerfile");
        assert!(
            dockerfile.contains(&format!("ENTRYPOINT [\"{}\"]", spec.entrypoint[0])),
            "ENTRYPOINT differs from the Dockerfile"
        );
    }

    #[test]
    fn ldd_output_is_read_both_ways() {
        let libs = shared_libraries(Path::new("/bin/sh")).unwrap();
        assert!(libs.iter().any(|l| l.to_string_lossy().contains("libc.so")), "{libs:?}");
    }
}
