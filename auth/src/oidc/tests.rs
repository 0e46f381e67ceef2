//! The verifier against an issuer served over real TLS in the test: its discovery document and
//! key set, keys made with ring, tokens signed as an issuer signs them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::user::AuthMethod;

const CLIENT: &str = "myownshell-gateway";
const SECRET: &str = "s3cret:with/odd chars";

/// A signing key: its id, its PKCS#8 document, its public JWK.
struct SigningKey {
    id: String,
    pkcs8: Vec<u8>,
    jwk: Value,
}

fn signing_key(id: &str) -> SigningKey {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap().as_ref().to_vec();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng).unwrap();
    // An uncompressed point: 0x04, then x and y of 32 bytes each.
    let point = pair.public_key().as_ref();
    let jwk = json!({"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": id,
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65])});
    SigningKey { id: id.to_owned(), pkcs8, jwk }
}

/// What the issuer serves, and how often its keys were asked for.
#[derive(Clone)]
struct Served {
    discovery: Arc<Mutex<Value>>,
    keys: Arc<Mutex<Value>>,
    key_fetches: Arc<AtomicUsize>,
    /// Its token endpoint: the key it signs with, and the codes it gave (code: its PKCE
    /// challenge and nonce), as an issuer has them after a person signed in.
    signer: Arc<(String, Vec<u8>)>,
    /// The refresh tokens revoked, each with whether the client authenticated.
    revoked: Arc<Mutex<Vec<(String, bool)>>>,
    codes: Arc<Mutex<std::collections::HashMap<String, (String, String)>>>,
}

/// The token endpoint: `client_secret_basic`, the code with its PKCE verifier, or the refresh
/// token `r1`; signed ID tokens for alice.
async fn token_endpoint(State(s): State<Served>, headers: http::HeaderMap, form: String) -> axum::response::Response {
    use axum::response::IntoResponse;
    let refuse = |status: http::StatusCode, error: &str| (status, axum::Json(json!({"error": error}))).into_response();
    let basic = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if basic != Some(flow::basic_credentials(CLIENT, SECRET).as_str()) {
        return refuse(http::StatusCode::UNAUTHORIZED, "invalid_client");
    }
    let form: std::collections::HashMap<String, String> =
        form_urlencoded::parse(form.as_bytes()).into_owned().collect();
    let iss = s.discovery.lock().unwrap()["issuer"].clone();
    let mut claims = json!({"iss": iss, "aud": CLIENT, "sub": "a1", "preferred_username": "alice",
        "groups": ["users"], "iat": now(), "exp": now() + 300});
    let refresh = match form.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let Some((challenge, nonce)) = form.get("code").and_then(|c| s.codes.lock().unwrap().remove(c)) else {
                return refuse(http::StatusCode::BAD_REQUEST, "invalid_grant");
            };
            if form.get("code_verifier").map(|v| flow::challenge(v)) != Some(challenge) {
                return refuse(http::StatusCode::BAD_REQUEST, "invalid_grant");
            }
            claims["nonce"] = nonce.into();
            "r1"
        }
        Some("refresh_token") if form.get("refresh_token").map(String::as_str) == Some("r1") => "r2",
        _ => return refuse(http::StatusCode::BAD_REQUEST, "invalid_grant"),
    };
    let key = SigningKey { id: s.signer.0.clone(), pkcs8: s.signer.1.clone(), jwk: Value::Null };
    axum::Json(json!({"id_token": sign(&key, &claims), "refresh_token": refresh, "expires_in": 300})).into_response()
}

struct Issuer {
    url: String,
    ca_file: tempfile::NamedTempFile,
    served: Served,
    shutdown: CancellationToken,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn issuer(keys: &[&SigningKey]) -> Issuer {
    let tls = myownshell_envtest::tls::loopback("oidc-issuer").unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let discovery = json!({"issuer": url, "authorization_endpoint": format!("{url}/oauth2/auth"),
        "token_endpoint": format!("{url}/oauth2/token"), "jwks_uri": format!("{url}/keys"),
        "revocation_endpoint": format!("{url}/oauth2/revoke"), "code_challenge_methods_supported": ["S256"]});
    let served = Served {
        discovery: Arc::new(Mutex::new(discovery)),
        keys: Arc::new(Mutex::new(json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()}))),
        key_fetches: Arc::new(AtomicUsize::new(0)),
        signer: Arc::new((keys[0].id.clone(), keys[0].pkcs8.clone())),
        codes: Arc::default(),
        revoked: Arc::default(),
    };
    let app = Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(|State(s): State<Served>| async move { axum::Json(s.discovery.lock().unwrap().clone()) }),
        )
        .route(
            "/keys",
            get(|State(s): State<Served>| async move {
                s.key_fetches.fetch_add(1, Ordering::SeqCst);
                axum::Json(s.keys.lock().unwrap().clone())
            }),
        )
        .route("/oauth2/token", axum::routing::post(token_endpoint))
        .route(
            "/oauth2/revoke",
            axum::routing::post(|State(s): State<Served>, headers: http::HeaderMap, form: String| async move {
                let basic = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
                let authenticated = basic == Some(flow::basic_credentials(CLIENT, SECRET).as_str());
                let token =
                    form_urlencoded::parse(form.as_bytes()).find(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
                s.revoked.lock().unwrap().push((token.unwrap_or_default(), authenticated));
            }),
        )
        .with_state(served.clone());
    let shutdown = CancellationToken::new();
    tokio::spawn(myownshell_runtime::server::serve_tls(
        listener,
        tls.server.clone(),
        app,
        Default::default(),
        shutdown.clone(),
    ));
    let ca_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca_file.path(), tls.ca.cert_pem()).unwrap();
    Issuer { url, ca_file, served, shutdown }
}

fn options(issuer: &Issuer) -> OidcOptions {
    OidcOptions {
        issuer_url: issuer.url.clone(),
        client_id: CLIENT.into(),
        ca_file: Some(issuer.ca_file.path().to_owned()),
        client_secret: Some(ClientSecret(SECRET.into())),
        claims: ClaimRules {
            username_claim: "preferred_username".into(),
            username_prefix: Some("oidc:".into()),
            groups_claim: Some("groups".into()),
            groups_prefix: "oidc:".into(),
        },
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Claims as the issuer would give alice, with `change` applied.
fn claims(issuer: &Issuer, change: impl FnOnce(&mut Value)) -> Value {
    let mut claims = json!({"iss": issuer.url, "aud": CLIENT, "sub": "a1", "preferred_username": "alice",
        "groups": ["users"], "iat": now(), "exp": now() + 300, "nonce": "n-1"});
    change(&mut claims);
    claims
}

fn sign(key: &SigningKey, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(key.id.clone());
    encode(&header, claims, &EncodingKey::from_ec_der(&key.pkcs8)).unwrap()
}

#[tokio::test]
async fn a_token_verifies_only_when_everything_in_it_holds() {
    let (key, stranger) = (signing_key("k1"), signing_key("k1"));
    let issuer = issuer(&[&key]).await;
    let verifier = Verifier::discover(options(&issuer)).await.unwrap();
    assert_eq!(verifier.provider().token_endpoint, format!("{}/oauth2/token", issuer.url));

    let good = sign(&key, &claims(&issuer, |_| {}));
    let verified = verifier.verify(&good, Some("n-1")).await.unwrap();
    assert_eq!(verified.user.name, "oidc:alice");
    assert_eq!(verified.user.groups, ["oidc:users"]);
    assert_eq!(verified.user.method, AuthMethod::OidcIdToken);
    assert!(verified.expiry > SystemTime::now());

    let tampered = {
        let mut parts: Vec<String> = good.split('.').map(str::to_owned).collect();
        parts[1] = URL_SAFE_NO_PAD.encode(claims(&issuer, |c| c["preferred_username"] = "admin".into()).to_string());
        parts.join(".")
    };
    let hmac = {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        encode(&header, &claims(&issuer, |_| {}), &EncodingKey::from_secret(b"public")).unwrap()
    };
    let cases: Vec<(&str, String, Option<&str>, &str)> = vec![
        ("another audience", sign(&key, &claims(&issuer, |c| c["aud"] = "other".into())), None, "another client"),
        ("another issuer", sign(&key, &claims(&issuer, |c| c["iss"] = "https://evil".into())), None, "another issuer"),
        ("expired", sign(&key, &claims(&issuer, |c| c["exp"] = (now() - 120).into())), None, "expired"),
        ("clocks apart", sign(&key, &claims(&issuer, |c| c["nbf"] = (now() + 600).into())), None, "clock"),
        ("issued in the future", sign(&key, &claims(&issuer, |c| c["iat"] = (now() + 600).into())), None, "clock"),
        ("another nonce", good.clone(), Some("n-2"), "nonce"),
        ("a stranger's key of the same id", sign(&stranger, &claims(&issuer, |_| {})), None, "signature"),
        ("a changed payload", tampered, None, "signature"),
        ("HMAC with a public secret", hmac, None, "not taken"),
        ("no exp", sign(&key, &claims(&issuer, |c| drop(c.as_object_mut().unwrap().remove("exp")))), None, "\"exp\""),
        ("not a JWT", "e30.e30".into(), None, "not a signed JWT"),
        ("too long", "a".repeat(TOKEN_LIMIT + 1), None, "longer than"),
    ];
    for (name, token, nonce, words) in cases {
        match verifier.verify(&token, nonce).await {
            Ok(v) => panic!("{name}: verified as {:?}", v.user),
            Err(e) => assert!(e.to_string().contains(words), "{name}: {e}"),
        }
    }
}

#[tokio::test]
async fn rotated_keys_are_fetched_and_made_up_key_ids_do_not_hammer_the_issuer() {
    let (old, new) = (signing_key("old"), signing_key("new"));
    let issuer = issuer(&[&old]).await;

    // At most one fetch an hour for unknown key ids: the made-up ones cost nothing.
    let patient = Verifier::discover_with(options(&issuer), Duration::from_secs(3600)).await.unwrap();
    patient.verify(&sign(&old, &claims(&issuer, |_| {})), None).await.unwrap();
    for kid in 0..20 {
        let made_up = SigningKey { id: format!("made-up-{kid}"), ..signing_key("x") };
        let e = patient.verify(&sign(&made_up, &claims(&issuer, |_| {})), None).await.unwrap_err();
        assert!(matches!(e, OidcError::UnknownKey(_)), "{e}");
    }
    assert_eq!(issuer.served.key_fetches.load(Ordering::SeqCst), 1, "one fetch for all of them");

    // The issuer rotates: a token of the new key is taken once fetched, the old key's no more.
    let eager = Verifier::discover_with(options(&issuer), Duration::ZERO).await.unwrap();
    eager.verify(&sign(&old, &claims(&issuer, |_| {})), None).await.unwrap();
    *issuer.served.keys.lock().unwrap() = json!({"keys": [new.jwk]});
    let verified = eager.verify(&sign(&new, &claims(&issuer, |_| {})), None).await.unwrap();
    assert_eq!(verified.user.name, "oidc:alice");
    // The set fetched again no longer holds the old key: its tokens count no more.
    let e = eager.verify(&sign(&old, &claims(&issuer, |_| {})), None).await.unwrap_err();
    assert!(matches!(e, OidcError::UnknownKey(_)), "{e}");
}

#[tokio::test]
async fn an_issuer_that_cannot_be_used_is_said_at_start() {
    let key = signing_key("k1");
    let issuer = issuer(&[&key]).await;
    issuer.served.discovery.lock().unwrap()["issuer"] = "https://somewhere-else".into();
    let e = Verifier::discover(options(&issuer)).await.unwrap_err();
    assert!(e.to_string().contains("not the configured"), "{e}");

    let cases: [(&str, OidcOptions, &str); 3] = [
        ("http", OidcOptions { issuer_url: "http://idp".into(), ..options(&issuer) }, "not https"),
        ("no client", OidcOptions { client_id: String::new(), ..options(&issuer) }, "client id"),
        ("untrusted", OidcOptions { ca_file: None, ..options(&issuer) }, "cannot be reached"),
    ];
    for (name, options, words) in cases {
        let e = Verifier::discover(options).await.unwrap_err();
        assert!(e.to_string().contains(words), "{name}: {e}");
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
    drop(listener);
    let e = Verifier::discover(OidcOptions { issuer_url: closed, ..options(&issuer) }).await.unwrap_err();
    assert!(matches!(e, OidcError::Unreachable(_)), "{e}");
}

#[tokio::test]
async fn a_code_is_exchanged_with_its_verifier_and_refreshed_for_the_same_user() {
    let key = signing_key("k1");
    let issuer = issuer(&[&key]).await;
    let verifier = Verifier::discover(options(&issuer)).await.unwrap();
    let redirect = "https://gw.example/oidc/callback";
    let sign_in = flow::begin(verifier.provider(), CLIENT, redirect, &["groups".into()]).unwrap();
    assert!(sign_in.url.starts_with(&format!("{}/oauth2/auth?", issuer.url)), "{}", sign_in.url);
    // The person signs in; the issuer keeps the code's challenge and nonce from the request.
    let query: std::collections::HashMap<String, String> =
        form_urlencoded::parse(sign_in.url.split_once('?').unwrap().1.as_bytes()).into_owned().collect();
    let code = |name: &str| {
        issuer
            .served
            .codes
            .lock()
            .unwrap()
            .insert(name.into(), (query["code_challenge"].clone(), query["nonce"].clone()));
        name.to_owned()
    };

    let signed_in = verifier.exchange(&code("c1"), &sign_in, redirect).await.unwrap();
    assert_eq!(signed_in.token.user.name, "oidc:alice");
    assert_eq!(signed_in.refresh_token.as_deref(), Some("r1"));
    assert!(!format!("{signed_in:?}").contains(&signed_in.id_token), "no token in a Debug");

    let refreshed = verifier.refresh(signed_in.refresh_token.as_deref().unwrap()).await.unwrap();
    assert_eq!(refreshed.token.user, signed_in.token.user);
    assert_eq!(refreshed.refresh_token.as_deref(), Some("r2"), "a rotated refresh token is kept");
    verifier.revoke("r2").await.unwrap();
    assert_eq!(*issuer.served.revoked.lock().unwrap(), [("r2".to_owned(), true)], "revoked as the client (RFC 7009)");

    let another_verifier = flow::SignIn { verifier: flow::random_value().unwrap(), ..sign_in.clone() };
    let another_nonce = flow::SignIn { nonce: "someone else's".into(), ..sign_in.clone() };
    let wrong_secret =
        Verifier::discover(OidcOptions { client_secret: Some(ClientSecret("wrong".into())), ..options(&issuer) })
            .await
            .unwrap();
    let cases = [
        ("a used code", verifier.exchange("c1", &sign_in, redirect).await, "sign in again (invalid_grant)"),
        ("another verifier", verifier.exchange(&code("c2"), &another_verifier, redirect).await, "invalid_grant"),
        ("another sign-in's nonce", verifier.exchange(&code("c3"), &another_nonce, redirect).await, "nonce"),
        ("a wrong secret", wrong_secret.exchange(&code("c4"), &sign_in, redirect).await, "client id or secret"),
    ];
    for (name, result, words) in cases {
        let e = result.unwrap_err();
        assert!(e.to_string().contains(words), "{name}: {e}");
    }
}
