//! Names fixed by the design (`shared/DESIGN.md`, "Names"). Tests, manifests and both binaries
//! use these constants, so a rename happens in exactly one place.

pub const GROUP: &str = "myownshell.io";
pub const VERSION: &str = "v1alpha1";
pub const API_VERSION: &str = "myownshell.io/v1alpha1";
pub const KIND: &str = "MyOwnShell";
pub const PLURAL: &str = "myownshells";
pub const SINGULAR: &str = "myownshell";
pub const SHORT_NAME: &str = "mos";
/// `<plural>.<group>`, the name of the CustomResourceDefinition object.
pub const CRD_NAME: &str = "myownshells.myownshell.io";

pub const FINALIZER: &str = "myownshell.io/finalizer";
/// Field manager for server-side apply by the controller.
pub const FIELD_MANAGER: &str = "myownshell-controller";

pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_NAME_VALUE: &str = "myownshell";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const LABEL_MANAGED_BY_VALUE: &str = "myownshell-operator";

pub const MUTATE_PATH: &str = "/mutate-myownshell-io-v1alpha1-myownshell";
pub const VALIDATE_PATH: &str = "/validate-myownshell-io-v1alpha1-myownshell";
pub const HEALTHZ_PATH: &str = "/healthz";
pub const READYZ_PATH: &str = "/readyz";
pub const METRICS_PATH: &str = "/metrics";

/// Condition types reported in `status.conditions`.
pub mod conditions {
    pub const AVAILABLE: &str = "Available";
    pub const PROGRESSING: &str = "Progressing";
    pub const DEGRADED: &str = "Degraded";
}
