//! Where the session holder comes from when `--session-image` is not given: the image of the
//! controller's own pod (the operator's image holds `myownshell-session`), read once at start, so
//! that an upgrade of the operator brings its holder with it, however the operator was installed
//! (kustomize, Helm) and whatever its image is called. A pod that cannot be read is an error, not
//! a shell without a holder: a holder that came and went with the controller's restarts would
//! roll every shell's pods each time.

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};

/// The value of `--session-image` that runs shells without a holder.
pub const NONE: &str = "none";

/// The downward API's name of this pod (`config/manager/controller.yaml`).
const POD_NAME: &str = "POD_NAME";

/// The holder's image: the flag's (`none`: no holder), else this pod's own image, else, outside a
/// pod (`cargo xtask dev`, a test), none.
pub async fn session_image(flag: Option<&str>, client: &Client) -> Result<Option<String>, kube::Error> {
    match flag {
        Some(NONE) => return Ok(None),
        Some(image) => return Ok(Some(image.to_owned())),
        None => {}
    }
    let Some(name) = std::env::var(POD_NAME).ok().filter(|n| !n.is_empty()) else {
        tracing::warn!("not running in a pod and no --session-image: shells run without a session holder");
        return Ok(None);
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &myownshell_runtime::pod::namespace());
    let pod = pods.get(&name).await?;
    let image = pod.spec.and_then(|s| s.containers.into_iter().next()).and_then(|c| c.image);
    tracing::info!(image = image.as_deref().unwrap_or("none"), "the session holder comes from this pod's image");
    Ok(image)
}
