//! The user's bearer token for the gateway, from the kubeconfig user as kubectl takes it: a
//! `token`, a `tokenFile`, an exec credential plugin (kubelogin's `oidc-login get-token`, a
//! cloud's CLI: the OIDC kubeconfigs of most organisations), or kubectl's legacy `oidc` auth
//! provider's `id-token`. kube's client runs exec plugins for its own requests, but its runner is
//! private to it and the gateway's WebSocket is not one of its requests, hence this small runner
//! of the client-go exec protocol (`KUBERNETES_EXEC_INFO` in, an `ExecCredential` out).

use std::io::Read as _;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use kube::config::{AuthInfo, ExecConfig, ExecInteractiveMode};
use secrecy::ExposeSecret;

/// The most an exec plugin may print (an `ExecCredential` is a few KiB).
const MAX_CREDENTIAL: u64 = 1024 * 1024;

/// The user's bearer token, if the kubeconfig user has one in any of the ways above.
pub fn bearer_token(auth: &AuthInfo) -> anyhow::Result<Option<String>> {
    if let Some(token) = &auth.token {
        return Ok(Some(token.expose_secret().to_owned()));
    }
    if let Some(file) = &auth.token_file {
        let token = std::fs::read_to_string(file).with_context(|| format!("reading the tokenFile {file}"))?;
        return Ok(Some(token.trim().to_owned()));
    }
    if let Some(exec) = &auth.exec {
        return exec_token(exec).map(Some);
    }
    Ok(auth
        .auth_provider
        .as_ref()
        .filter(|provider| provider.name == "oidc")
        .and_then(|provider| provider.config.get("id-token").cloned())
        .filter(|token| !token.is_empty()))
}

/// The token an exec credential plugin gives.
pub fn exec_token(exec: &ExecConfig) -> anyhow::Result<String> {
    let program = exec.command.as_deref().context("the kubeconfig user's exec plugin names no command")?;
    let mut command = Command::new(program);
    command.args(exec.args.iter().flatten());
    for pair in exec.env.iter().flatten() {
        if let (Some(name), Some(value)) = (pair.get("name"), pair.get("value")) {
            command.env(name, value);
        }
    }
    // A plugin may ask the person something (kubelogin opens a browser and says so on stderr).
    let interactive = exec.interactive_mode != Some(ExecInteractiveMode::Never);
    let info = serde_json::json!({
        "apiVersion": exec.api_version.as_deref().unwrap_or("client.authentication.k8s.io/v1"),
        "kind": "ExecCredential",
        "spec": { "interactive": interactive },
    });
    command
        .env("KUBERNETES_EXEC_INFO", info.to_string())
        .stdin(if interactive { Stdio::inherit() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = command.spawn().with_context(|| {
        let hint = exec.install_hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default();
        format!("running the kubeconfig user's exec plugin {program}{hint}")
    })?;
    let mut out = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        stdout.take(MAX_CREDENTIAL + 1).read_to_end(&mut out).context("reading the exec plugin's output")?;
    }
    let status = child.wait().context("waiting for the exec plugin")?;
    if !status.success() {
        bail!("the kubeconfig user's exec plugin {program} failed ({status})");
    }
    if out.len() as u64 > MAX_CREDENTIAL {
        bail!("the exec plugin {program} printed more than {MAX_CREDENTIAL} bytes");
    }
    token_of(&out).with_context(|| format!("the exec plugin {program}'s ExecCredential"))
}

/// The token of an `ExecCredential` (pure).
pub fn token_of(credential: &[u8]) -> anyhow::Result<String> {
    let credential: serde_json::Value = serde_json::from_slice(credential).context("it is not JSON")?;
    let kind = credential.get("kind").and_then(serde_json::Value::as_str).unwrap_or_default();
    if kind != "ExecCredential" {
        bail!("its kind is {kind:?}, not ExecCredential");
    }
    credential
        .pointer("/status/token")
        .and_then(serde_json::Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .context("it holds no token (a client certificate does not get through the gateway)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_credential_gives_its_token() {
        let cases: [(&str, Result<&str, &str>); 5] = [
            (
                r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t1"}}"#,
                Ok("t1"),
            ),
            (r#"{"kind":"ExecCredential","status":{"clientCertificateData":"x"}}"#, Err("holds no token")),
            (r#"{"kind":"ExecCredential","status":{"token":""}}"#, Err("holds no token")),
            (r#"{"kind":"Other","status":{"token":"t"}}"#, Err("not ExecCredential")),
            ("not json", Err("not JSON")),
        ];
        for (credential, want) in cases {
            match (token_of(credential.as_bytes()), want) {
                (Ok(token), Ok(expected)) => assert_eq!(token, expected),
                (Err(e), Err(words)) => assert!(format!("{e:#}").contains(words), "{credential}: {e:#}"),
                (got, want) => panic!("{credential}: got {got:?}, want {want:?}"),
            }
        }
    }

    fn exec(script: &str) -> ExecConfig {
        ExecConfig {
            api_version: Some("client.authentication.k8s.io/v1".into()),
            command: Some("sh".into()),
            args: Some(vec!["-c".into(), script.into()]),
            env: Some(vec![[("name".to_owned(), "GREETING".to_owned()), ("value".to_owned(), "t".to_owned())].into()]),
            interactive_mode: Some(ExecInteractiveMode::Never),
            ..Default::default()
        }
    }

    #[test]
    fn a_kubeconfig_user_of_any_kind_gives_its_token() {
        // The plugin gets the exec info and its env, as client-go gives them.
        let printing = exec(
            r#"case "$KUBERNETES_EXEC_INFO" in *'"interactive":false'*) ;; *) exit 3;; esac
               printf '{"kind":"ExecCredential","status":{"token":"%s-1"}}' "$GREETING""#,
        );
        let oidc = kube::config::AuthProviderConfig {
            name: "oidc".into(),
            config: [("id-token".to_owned(), "id-1".to_owned())].into(),
            ..Default::default()
        };
        let cases = [
            ("token", AuthInfo { token: Some("s-1".to_owned().into()), ..Default::default() }, Some("s-1")),
            ("exec", AuthInfo { exec: Some(printing), ..Default::default() }, Some("t-1")),
            ("oidc auth provider", AuthInfo { auth_provider: Some(oidc), ..Default::default() }, Some("id-1")),
            ("a client certificate", AuthInfo { client_certificate: Some("c".into()), ..Default::default() }, None),
        ];
        for (name, auth, want) in cases {
            assert_eq!(bearer_token(&auth).unwrap().as_deref(), want, "{name}");
        }
        let failing = AuthInfo { exec: Some(exec("echo broken >&2; exit 1")), ..Default::default() };
        let e = bearer_token(&failing).unwrap_err();
        assert!(format!("{e:#}").contains("exec plugin sh failed"), "{e:#}");
    }
}
