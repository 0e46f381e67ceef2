//! Tokens the tests need and TokenRequest will not give.

use myownshell_envtest::service_account_user;

/// A ServiceAccount token exactly like the apiserver's own, signed with the control plane's
/// service-account key, expiring `exp_offset` seconds from now (negative: already expired).
/// TokenRequest refuses lifetimes under ten minutes, so a real one cannot be waited out in a
/// test.
pub fn forge_service_account_token(
    cp: &myownshell_envtest::ControlPlane,
    ns: &str,
    sa: &str,
    uid: &str,
    exp_offset: i64,
) -> String {
    // In tests a panic is the failure report.
    #![allow(clippy::unwrap_used)]
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    use rustls::pki_types::PrivatePkcs8KeyDer;
    use rustls::pki_types::pem::PemObject;

    let pem = std::fs::read(cp.layout().dir.join("pki/sa.key")).unwrap();
    let der = PrivatePkcs8KeyDer::from_pem_slice(&pem).unwrap();
    let rng = ring::rand::SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.secret_pkcs8_der(), &rng).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let issuer = cp.service_account_issuer();
    let claims = serde_json::json!({
        "aud": [issuer],
        "iss": issuer,
        "sub": service_account_user(ns, sa),
        "iat": now - 3600,
        "nbf": now - 3600,
        "exp": now + exp_offset,
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": sa, "uid": uid}},
    });
    let header = serde_json::json!({"alg": "ES256", "typ": "JWT"});
    let signing_input = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
    let signature = key.sign(&rng, signing_input.as_bytes()).unwrap();
    format!("{signing_input}.{}", B64.encode(signature.as_ref()))
}
