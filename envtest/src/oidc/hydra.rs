//! Ory Hydra, the test bed's OpenID Connect provider: where its binary is (built from the Go
//! module proxy by `cargo xtask` into [`TOOL`]'s cache folder, like kube-router and kwok, so
//! that running it needs no Go), its configuration, and the process.
//!
//! It runs as `hydra serve all` with `dsn: memory` (SQLite in memory: its state dies with the
//! process, and migrations run at each start), both endpoints on 127.0.0.1 over TLS with the test
//! bed's certificate, so that the apiserver reaches a real `https://` issuer. Telemetry is off
//! (`--sqa-opt-out`), and its log never holds tokens, codes or challenges (warnings and errors
//! only, sensitive values redacted).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::assets::CachedTool;
use crate::process::{ManagedProcess, ProcessSpec};

/// The Hydra release built and run.
pub const VERSION: &str = "v2.3.0";
/// A directory holding [`BINARY`], instead of [`TOOL`]'s cache folder (what `cargo xtask test` sets).
pub const ENV: &str = "MYOWNSHELL_HYDRA";
/// File name of the binary.
pub const BINARY: &str = "hydra";
/// How long Hydra may take to migrate its in-memory database and make its signing keys.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the binary is found.
pub const TOOL: CachedTool = CachedTool {
    name: "Hydra",
    folder: "hydra",
    version: VERSION,
    env: ENV,
    binary: BINARY,
    built_by: "`cargo xtask test` and `cargo xtask hydra`",
};

/// The binary, or what is missing and how to get it.
pub fn locate() -> Result<PathBuf, String> {
    TOOL.locate()
}

/// Where Hydra listens and where it sends browsers.
#[derive(Debug, Clone)]
pub struct HydraConfig {
    /// The public endpoint's port on 127.0.0.1 (the issuer's).
    pub public_port: u16,
    /// The admin endpoint's port on 127.0.0.1.
    pub admin_port: u16,
    /// The login page's base URL (`https://127.0.0.1:PORT`): `/login` and `/consent` there.
    pub login_url: String,
    /// The serving certificate and key files (PEM), for both endpoints.
    pub cert: PathBuf,
    /// See `cert`.
    pub key: PathBuf,
    /// Hydra's system secret (at least 16 characters): it encrypts its flows and cookies.
    pub secret: String,
}

impl HydraConfig {
    /// The issuer: the public endpoint, as Hydra names itself in discovery and in `iss`.
    pub fn issuer(&self) -> String {
        format!("https://127.0.0.1:{}", self.public_port)
    }

    /// The admin endpoint.
    pub fn admin_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.admin_port)
    }

    /// Hydra's configuration file. JSON, which Hydra reads as YAML; keys as its
    /// `.schema/config.schema.json` names them.
    pub fn file(&self) -> String {
        let config = json!({
            "dsn": "memory",
            "serve": {
                "public": { "host": "127.0.0.1", "port": self.public_port },
                "admin": { "host": "127.0.0.1", "port": self.admin_port },
                "tls": {
                    "enabled": true,
                    "cert": { "path": self.cert },
                    "key": { "path": self.key },
                },
            },
            "urls": {
                "self": { "issuer": self.issuer() },
                "login": format!("{}/login", self.login_url),
                "consent": format!("{}/consent", self.login_url),
            },
            "secrets": { "system": [self.secret] },
            "oidc": { "subject_identifiers": { "supported_types": ["public"] } },
            // Opaque access tokens: only the ID token is a JWT, the credential Kubernetes takes.
            "strategies": { "access_token": "opaque" },
            "ttl": { "id_token": "1h", "access_token": "1h", "refresh_token": "8h" },
            // Warnings and errors only: Hydra's request log (info) writes each redirect's
            // `Location`, authorization codes and login challenges included, even with
            // `leak_sensitive_values` off.
            "log": { "level": "warn", "format": "text", "leak_sensitive_values": false },
        });
        // A json! value always serializes.
        serde_json::to_string_pretty(&config).unwrap_or_default()
    }
}

/// Start `binary` as `hydra serve all` with `config` written to `dir/hydra.yaml`, logging to
/// `dir/hydra.log`. It dies with the test process (see [`crate::process`]).
pub fn spawn(binary: &Path, config: &HydraConfig, dir: &Path) -> Result<ManagedProcess, String> {
    let file = dir.join("hydra.yaml");
    std::fs::write(&file, config.file()).map_err(|e| format!("writing {}: {e}", file.display()))?;
    let spec = ProcessSpec::new("hydra", binary, dir.join("hydra.log"))
        .args(["serve", "all", "--sqa-opt-out", "--config"])
        .arg(file.as_os_str());
    ManagedProcess::spawn(spec).map_err(|e| format!("starting Hydra {}: {e}", binary.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issuer_is_the_public_endpoint_over_https_and_browsers_go_to_the_login_page() {
        let config = HydraConfig {
            public_port: 4444,
            admin_port: 4445,
            login_url: "https://127.0.0.1:4446".into(),
            cert: "/c.pem".into(),
            key: "/k.pem".into(),
            secret: "0123456789abcdef".into(),
        };
        let file: serde_json::Value = serde_json::from_str(&config.file()).unwrap();
        assert_eq!(file["urls"]["self"]["issuer"], "https://127.0.0.1:4444");
        assert_eq!(file["urls"]["login"], "https://127.0.0.1:4446/login");
        assert_eq!(file["urls"]["consent"], "https://127.0.0.1:4446/consent");
        assert_eq!(file["serve"]["tls"]["enabled"], true);
        assert_eq!(file["dsn"], "memory");
        assert_eq!(file["log"]["leak_sensitive_values"], false);
        assert_eq!(file["log"]["level"], "warn", "Hydra's request log holds codes");
    }
}
