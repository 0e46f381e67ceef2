//! What the chart is made from: `config/` rendered by kustomize, never read file by file, so the
//! chart gets exactly the objects `kubectl apply -k` would (prefixes, namespace, labels,
//! patches): `config/default`, `config/overlays/cert-manager` (the same with cert-manager's
//! certificates) and `config/prometheus` (applied beside either).

use myownshell_envtest::kustomize::render;
use serde_json::Value;

/// The tree the chart's defaults render.
pub const DEFAULT: &str = "default";
/// `certificates.mode: cert-manager`.
pub const CERT_MANAGER: &str = "overlays/cert-manager";
/// `metrics.*`.
pub const PROMETHEUS: &str = "prometheus";

/// The three renders.
pub struct Inputs {
    pub default: Vec<Value>,
    pub cert_manager: Vec<Value>,
    pub prometheus: Vec<Value>,
}

/// Render all three.
pub fn render_all() -> Result<Inputs, String> {
    Ok(Inputs { default: render(DEFAULT)?, cert_manager: render(CERT_MANAGER)?, prometheus: render(PROMETHEUS)? })
}
