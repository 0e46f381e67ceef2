//! What verifying an ID token costs a request once the issuer's keys are cached
//! (`Verifier::verify`: the header, the key looked up, the signature, issuer, audience and
//! times, the nonce and authorized party, the user and groups read), against the floor of the
//! bare signature check of the same token with the same key (`jsonwebtoken::decode`, no claim
//! checked), in the same run. The token is a real one of the test bed's Ory Hydra (RS256), for
//! alice, signed in as a browser does. Run by `cargo xtask bench signin`, which gives
//! `MYOWNSHELL_HYDRA`; alone: `cargo bench -p myownshell-auth --bench verify -- --iterations N`.
//!
//! Rounds alternate the two, and each figure is the median of its rounds, so that a noisy
//! moment of the machine weighs on both alike.

// A bench's failure is its report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use jsonwebtoken::{Validation, decode, decode_header};
use myownshell_auth::oidc::keys::KeySet;
use myownshell_auth::oidc::{ClaimRules, OidcOptions, Verifier};
use myownshell_envtest::oidc::admin::Client;
use myownshell_envtest::oidc::sign_in::sign_in;
use myownshell_envtest::oidc::users::ALICE;
use myownshell_envtest::oidc::{Provider, REDIRECT_URI, https, random_secret};
use secrecy::ExposeSecret as _;

const ROUNDS: usize = 7;

/// `--iterations N` (default 20,000) from the command line; cargo's own `--bench` is ignored.
fn iterations() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2).find(|w| w[0] == "--iterations").map_or(20_000, |w| w[1].parse().expect("--iterations N"))
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(measure(iterations().max(100)));
}

async fn measure(iterations: usize) {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(dir.path()).await.unwrap();
    let client = Client {
        client_id: "myownshell-bench-verify".into(),
        client_secret: random_secret().unwrap(),
        redirect_uris: vec![REDIRECT_URI.into()],
        id_token_lifespan: None,
        refresh_id_token_lifespan: None,
    };
    provider.create_client(&client).await.unwrap();
    let tokens = sign_in(&provider, &client, ALICE.name, ALICE.password).await.unwrap();
    let token = tokens.id_token.expose_secret().to_owned();
    let ca = dir.path().join("issuer-ca.crt");
    std::fs::write(&ca, provider.ca_pem()).unwrap();
    let options = OidcOptions {
        issuer_url: provider.issuer(),
        client_id: client.client_id.clone(),
        ca_file: Some(ca),
        client_secret: None,
        claims: ClaimRules {
            username_claim: "sub".into(),
            username_prefix: Some("oidc:".into()),
            groups_claim: Some("groups".into()),
            groups_prefix: "oidc:".into(),
        },
    };
    let verifier = Verifier::discover(options).await.unwrap();
    // The first verification fetches the issuer's keys; every one after finds them cached.
    let verified = verifier.verify(&token, None).await.unwrap();
    assert_eq!(verified.user.name, "oidc:alice");

    // The floor's key: the very key of the issuer's set that signed the token, read as the
    // verifier reads it.
    let jwks = http::Request::get(&verifier.provider().jwks_uri).body(Vec::new()).unwrap();
    let jwks = https::send(&provider.client_tls(), jwks).await.unwrap();
    let header = decode_header(&token).unwrap();
    let keys = KeySet::parse(&jwks.body).unwrap();
    let key = keys.find(header.kid.as_deref(), header.alg).unwrap().decoding().clone();
    let mut bare = Validation::new(header.alg);
    bare.required_spec_claims.clear();
    (bare.validate_exp, bare.validate_nbf, bare.validate_aud) = (false, false, false);
    decode::<serde_json::Value>(&token, &key, &bare).unwrap();

    let (mut full, mut floor) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..iterations {
            black_box(verifier.verify(black_box(&token), None).await.unwrap());
        }
        full.push(per_call(started.elapsed(), iterations));
        let started = Instant::now();
        for _ in 0..iterations {
            black_box(decode::<serde_json::Value>(black_box(&token), &key, &bare).unwrap());
        }
        floor.push(per_call(started.elapsed(), iterations));
    }
    println!(
        "ID token verification ({:?}, a {}-bit key, a {}-byte token), keys cached, {ROUNDS} rounds of {iterations}:",
        header.alg,
        modulus_bits(&jwks.body, header.kid.as_deref()),
        token.len()
    );
    println!("{:>28}  {:>8}  {:>17}", "", "median", "rounds' spread");
    let row = |what: &str, (median, low, high): (f64, f64, f64)| {
        println!("{what:>28}  {median:>5.2} µs  {low:>6.2} – {high:>6.2} µs");
    };
    let (full, floor) = (spread(full), spread(floor));
    row("Verifier::verify", full);
    row("bare signature check", floor);
    println!("{:>28}  {:>5.2} µs  ({:.2}x the floor)", "added by the checks", full.0 - floor.0, full.0 / floor.0);
}

/// The size of the RSA modulus of key `kid` in the JWK Set `jwks` (0 for another kind of key).
fn modulus_bits(jwks: &[u8], kid: Option<&str>) -> usize {
    use base64::Engine as _;
    let set: serde_json::Value = serde_json::from_slice(jwks).unwrap();
    let keys = set["keys"].as_array().cloned().unwrap_or_default();
    let key = keys.iter().find(|k| k["kid"].as_str() == kid).unwrap();
    let n = key["n"].as_str().unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(n).map_or(0, |n| n.len() * 8)
}

fn per_call(took: Duration, calls: usize) -> f64 {
    took.as_secs_f64() * 1e6 / calls as f64
}

/// The median, the lowest and the highest of `values`.
fn spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    (values[values.len() / 2], values[0], values[values.len() - 1])
}
