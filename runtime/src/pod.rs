//! Where this process runs, as the downward API tells it.

/// The namespace the operator is installed in by default (`config/default`).
pub const DEFAULT_NAMESPACE: &str = "myownshell-system";

/// The namespace this pod runs in (`$POD_NAMESPACE`, set from `metadata.namespace` in the
/// manifests), else [`DEFAULT_NAMESPACE`] (a binary run outside a cluster).
pub fn namespace() -> String {
    std::env::var("POD_NAMESPACE").ok().filter(|n| !n.is_empty()).unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())
}
