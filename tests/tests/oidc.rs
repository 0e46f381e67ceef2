//! The test bed's identity provider, end to end on the real programs: Ory Hydra with our login
//! page, a browser's authorization-code flow (PKCE S256, state, nonce, the login form posted),
//! and kube-apiserver trusting Hydra through `--authentication-config`. What a person signed in
//! by Hydra is to Kubernetes: `kubectl auth whoami`, RBAC by the provider's groups, and the
//! tokens the apiserver must refuse.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use myownshell_envtest::control_plane::write_kubeconfig;
use myownshell_envtest::oidc::apiserver::{GROUPS_PREFIX, USERNAME_PREFIX};
use myownshell_envtest::oidc::sign_in::{SignInError, claim};
use myownshell_envtest::oidc::users::{ADMINS_GROUP, ALICE, BOB, REFUSED, USERS_GROUP};
use myownshell_envtest::oidc::{Order, TrustingCluster, shared};
use myownshell_envtest::{Kubectl, create_namespace, eventually};
use secrecy::SecretString;

/// How long RBAC may take to see a new binding (its informers), and the clock a token's expiry.
const DEADLINE: Duration = Duration::from_secs(30);

/// `kubectl` with a kubeconfig whose user is the bearer of `token`; the directory holding the
/// kubeconfig goes when the second value is dropped.
fn kubectl_with(bed: &TrustingCluster, token: &SecretString) -> (Kubectl, tempfile::TempDir) {
    use secrecy::ExposeSecret as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    write_kubeconfig(&path, &bed.control_plane.kubeconfig_for_token(token.expose_secret())).unwrap();
    (Kubectl::new(path), dir)
}

fn prefixed(prefix: &str, names: &[&str]) -> Vec<String> {
    names.iter().map(|n| format!("{prefix}{n}")).collect()
}

#[tokio::test]
async fn kubectl_auth_whoami_names_the_person_hydra_signed_in_with_their_groups() {
    let bed = shared();
    for user in [ALICE, BOB] {
        let tokens = bed.sign_in(&bed.client, user.name, user.password).await.unwrap();
        assert!(tokens.refresh_token.is_some(), "{}: offline_access gives a refresh token", user.name);
        let (kubectl, _dir) = kubectl_with(bed, &tokens.id_token);
        let out = kubectl.run(&["auth", "whoami", "-o", "json"]).await.unwrap().ok().unwrap();
        let review: serde_json::Value = serde_json::from_str(&out).unwrap();
        let info = &review["status"]["userInfo"];
        assert_eq!(info["username"], format!("{USERNAME_PREFIX}{}", user.name), "{out}");
        let groups: Vec<String> = serde_json::from_value(info["groups"].clone()).unwrap();
        let mut expected = prefixed(GROUPS_PREFIX, user.groups);
        expected.push("system:authenticated".into());
        assert_eq!(groups, expected, "{out}");
    }
}

#[tokio::test]
async fn the_providers_log_holds_no_token_code_challenge_or_password() {
    use secrecy::ExposeSecret as _;
    let bed = shared();
    let tokens = bed.sign_in(&bed.client, BOB.name, BOB.password).await.unwrap();
    let log = std::fs::read_to_string(bed.provider.log_path()).unwrap();
    let refresh = tokens.refresh_token.as_ref().map(|t| t.expose_secret().to_owned()).unwrap();
    for (what, secret) in [
        ("the ID token", tokens.id_token.expose_secret()),
        ("the refresh token", refresh.as_str()),
        ("an authorization code", "code=ory_ac_"),
        ("a login challenge", "login_challenge="),
        ("a consent challenge", "consent_challenge="),
        ("bob's password", BOB.password),
    ] {
        assert!(!log.contains(secret), "Hydra's log ({}) holds {what}", bed.provider.log_path().display());
    }
}

#[tokio::test]
async fn rbac_by_the_providers_groups_lets_members_in_and_no_one_else() {
    let bed = shared();
    let admin = bed.control_plane.client().unwrap();
    let ns = create_namespace(&admin, "oidc-rbac").await.unwrap();
    let reader = |name: &str, resource: &str, group: &str| {
        let role = Role {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some(ns.clone()), ..ObjectMeta::default() },
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec![resource.into()]),
                verbs: vec!["list".into()],
                ..PolicyRule::default()
            }]),
        };
        let binding = RoleBinding {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some(ns.clone()), ..ObjectMeta::default() },
            role_ref: RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: "Role".into(), name: name.into() },
            subjects: Some(vec![Subject {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "Group".into(),
                name: group.into(),
                ..Subject::default()
            }]),
        };
        (role, binding)
    };
    // Pods for everyone in the provider's users group; Secrets for its admins only.
    let users_group = format!("{GROUPS_PREFIX}{USERS_GROUP}");
    let admins_group = format!("{GROUPS_PREFIX}{ADMINS_GROUP}");
    for (role, binding) in
        [reader("pod-readers", "pods", &users_group), reader("secret-readers", "secrets", &admins_group)]
    {
        Api::<Role>::namespaced(admin.clone(), &ns).create(&PostParams::default(), &role).await.unwrap();
        Api::<RoleBinding>::namespaced(admin.clone(), &ns).create(&PostParams::default(), &binding).await.unwrap();
    }
    let as_bearer = |token: &SecretString| {
        use secrecy::ExposeSecret as _;
        bed.control_plane.client_with_token(token.expose_secret()).unwrap()
    };
    let alice = as_bearer(&bed.sign_in(&bed.client, ALICE.name, ALICE.password).await.unwrap().id_token);
    let bob = as_bearer(&bed.sign_in(&bed.client, BOB.name, BOB.password).await.unwrap().id_token);

    // Allowed first (polled: RBAC sees a new binding through its informers), so that the refusals
    // after it are refusals by a binding already in force.
    eventually("alice (oidc:myownshell:users) to list pods", DEADLINE, || async {
        Api::<Pod>::namespaced(alice.clone(), &ns)
            .list(&ListParams::default())
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    eventually("bob (oidc:admins) to list secrets", DEADLINE, || async {
        Api::<Secret>::namespaced(bob.clone(), &ns)
            .list(&ListParams::default())
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await
    .unwrap();

    let forbidden = |result: Result<(), kube::Error>, who: &str| match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{who}: expected 403 Forbidden, got {other:?}"),
    };
    // alice is not in the provider's admins group.
    forbidden(Api::<Secret>::namespaced(alice, &ns).list(&ListParams::default()).await.map(drop), "alice on secrets");
    // A stranger whose client certificate claims a group of the same name, unprefixed: the
    // binding is to the provider's group, which only the provider's tokens carry.
    let stranger = bed.control_plane.client_as_user("mallory", &[USERS_GROUP]).unwrap();
    forbidden(Api::<Pod>::namespaced(stranger, &ns).list(&ListParams::default()).await.map(drop), "mallory on pods");
}

#[tokio::test]
async fn a_wrong_password_is_refused_at_the_login_page_with_one_sentence() {
    let bed = shared();
    for (user, password) in [(ALICE.name, "not-her-password"), (ALICE.name, BOB.password), ("mallory", ALICE.password)]
    {
        match bed.sign_in(&bed.client, user, password).await {
            Err(SignInError::Refused(sentence)) => assert_eq!(sentence, REFUSED, "{user}"),
            other => panic!("{user} with a wrong password: expected the login page's refusal, got {other:?}"),
        }
    }
}

fn unauthorized(result: Result<(String, Vec<String>), kube::Error>, what: &str) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 401 => {}
        other => panic!("{what}: expected 401 Unauthorized, got {other:?}"),
    }
}

#[tokio::test]
async fn an_id_token_for_another_audience_is_refused_by_the_apiserver() {
    let bed = shared();
    let ours = bed.sign_in(&bed.client, ALICE.name, ALICE.password).await.unwrap();
    let theirs = bed.sign_in(&bed.other_audience, ALICE.name, ALICE.password).await.unwrap();
    // The same person, the same issuer, minutes to live: only the audience differs.
    assert_eq!(claim(&theirs.id_token, "aud").unwrap(), serde_json::json!([bed.other_audience.client_id]));
    assert_eq!(claim(&theirs.id_token, "iss").unwrap(), claim(&ours.id_token, "iss").unwrap());
    assert_eq!(bed.whoami(&ours.id_token).await.unwrap().0, format!("{USERNAME_PREFIX}{}", ALICE.name));
    unauthorized(bed.whoami(&theirs.id_token).await, "an ID token for another-application");
}

#[tokio::test]
async fn an_expired_id_token_is_refused_by_the_apiserver() {
    let bed = shared();
    // Two tokens of a client whose ID tokens live 5 s: the first shown at once (accepted: the
    // client's audience is trusted), the second only once the clock is past its own `exp` (never
    // shown before, so no cached answer of the apiserver's can stand for it).
    let fresh = bed.sign_in(&bed.short_lived, ALICE.name, ALICE.password).await.unwrap();
    assert_eq!(bed.whoami(&fresh.id_token).await.unwrap().0, format!("{USERNAME_PREFIX}{}", ALICE.name));
    let expiring = bed.sign_in(&bed.short_lived, ALICE.name, ALICE.password).await.unwrap();
    let exp = claim(&expiring.id_token, "exp").unwrap().as_u64().unwrap();
    eventually("the clock to pass the ID token's exp", DEADLINE, || async {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        if now > exp { Ok(()) } else { Err(format!("now {now}, exp {exp}")) }
    })
    .await
    .unwrap();
    unauthorized(bed.whoami(&expiring.id_token).await, "an expired ID token");
}

#[tokio::test]
async fn an_issuer_that_comes_up_after_the_apiserver_is_trusted_once_it_is_up() {
    // The apiserver is started (and `/readyz` answers ready) while nothing listens at the
    // issuer's port; then Hydra starts. `start_ordered` returns only once the apiserver has
    // accepted an ID token of alice's: it kept fetching the issuer's keys until it had them.
    let started = std::time::Instant::now();
    let bed = TrustingCluster::start_ordered(Order::ApiserverFirst).await.unwrap();
    let log = std::fs::read_to_string(bed.control_plane.layout().apiserver_log()).unwrap();
    let issuer = bed.provider.issuer();
    assert!(
        log.lines().any(|l| l.contains(&issuer) && l.to_ascii_lowercase().contains("connection refused")),
        "the apiserver's log says nothing of the issuer {issuer} being down at first:\n{}",
        log.lines().filter(|l| l.contains("jwt") || l.contains("oidc")).collect::<Vec<_>>().join("\n")
    );
    let tokens = bed.sign_in(&bed.client, BOB.name, BOB.password).await.unwrap();
    assert_eq!(bed.whoami(&tokens.id_token).await.unwrap().0, format!("{USERNAME_PREFIX}{}", BOB.name));
    eprintln!("issuer after the apiserver: trusted {:.1?} after the start began", started.elapsed());
}
