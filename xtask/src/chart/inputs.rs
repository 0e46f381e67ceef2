//! What the chart is made from: `config/` rendered by kustomize, never read file by file, so the
//! chart gets exactly the objects `kubectl apply -k` would (prefixes, namespace, labels,
//! patches): `config/default`, `config/overlays/cert-manager` (the same with cert-manager's
//! certificates), `config/overlays/constrained-impersonation` (the gateway's) and
//! `config/prometheus` (applied beside either).

use myownshell_envtest::kustomize::render;
use serde_json::Value;

/// The tree the chart's defaults render.
pub const DEFAULT: &str = "default";
/// `certificates.mode: cert-manager`.
pub const CERT_MANAGER: &str = "overlays/cert-manager";
/// `gateway.impersonation: constrained`.
pub const CONSTRAINED_IMPERSONATION: &str = "overlays/constrained-impersonation";
/// `metrics.*`.
pub const PROMETHEUS: &str = "prometheus";

/// The four renders.
pub struct Inputs {
    pub default: Vec<Value>,
    pub cert_manager: Vec<Value>,
    pub constrained_impersonation: Vec<Value>,
    pub prometheus: Vec<Value>,
}

/// Render all four.
pub fn render_all() -> Result<Inputs, String> {
    Ok(Inputs {
        default: render(DEFAULT)?,
        cert_manager: render(CERT_MANAGER)?,
        constrained_impersonation: render(CONSTRAINED_IMPERSONATION)?,
        prometheus: render(PROMETHEUS)?,
    })
}
