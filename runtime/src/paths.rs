//! The HTTP paths every binary serves the same way (`shared/DESIGN.md`, "Names"): the probes on
//! the plain-HTTP health port, the metrics on the authenticated HTTPS port.

/// Liveness probe path on each binary's health port: answers 200 while the process runs.
pub const HEALTHZ: &str = "/healthz";
/// Readiness probe path on each binary's health port: 200 only once the process can do its job
/// (caches synced, a trusted certificate served, …).
pub const READYZ: &str = "/readyz";
/// Prometheus scrape path on each binary's metrics port (authenticated and authorized).
pub const METRICS: &str = "/metrics";
