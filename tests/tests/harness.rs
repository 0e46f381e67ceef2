//! Proof that the harness is a real control plane: each test fails against a fake.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use myownshell_api::{MyOwnShell, MyOwnShellSpec, names};
use myownshell_envtest::rbac;
use myownshell_envtest::{create_namespace, eventually, service_account_token, service_account_user, shared};

const TIMEOUT: Duration = Duration::from_secs(30);

fn shell(name: &str, size: i32) -> MyOwnShell {
    MyOwnShell::new(name, MyOwnShellSpec { size: Some(size), ..MyOwnShellSpec::default() })
}

#[tokio::test]
async fn custom_resources_round_trip_through_the_apiserver() {
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = create_namespace(&client, "crud").await.unwrap();
    let api: Api<MyOwnShell> = Api::namespaced(client, &ns);

    let created = api.create(&PostParams::default(), &shell("alpha", 2)).await.unwrap();
    assert!(created.metadata.uid.is_some(), "the apiserver assigns a uid");
    assert_eq!(created.metadata.generation, Some(1));

    let got = api.get("alpha").await.unwrap();
    assert_eq!(got.spec.size, Some(2));

    api.create(&PostParams::default(), &shell("beta", 0)).await.unwrap();
    let names: Vec<String> =
        api.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|o| o.metadata.name).collect();
    assert_eq!(names, vec!["alpha", "beta"]);

    let patched = api
        .patch("alpha", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"size": 4}})))
        .await
        .unwrap();
    assert_eq!(patched.spec.size, Some(4));
    assert_eq!(patched.metadata.generation, Some(2), "a spec change bumps the generation");
}

#[tokio::test]
async fn kubectl_applies_a_sample_and_shows_the_printer_columns() {
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = create_namespace(&client, "kubectl").await.unwrap();
    let sample = std::fs::read_to_string(
        myownshell_envtest::assets::workspace_root().join("config/samples/myownshell_v1alpha1_myownshell_team.yaml"),
    )
    .unwrap();
    let kubectl = cp.kubectl();
    let applied = kubectl.apply(&ns, &sample).await.unwrap().ok().unwrap();
    assert!(applied.contains("myownshell.myownshell.io/team-shells created"), "{applied}");

    let table = kubectl.run(&["get", "mos", "-n", &ns]).await.unwrap().ok().unwrap();
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "SIZE", "READY", "AVAILABLE", "CLASS", "OWNER", "UP-TO-DATE", "STATE", "STOPS", "HOME", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(row[..2], ["team-shells", "3"], "{table}");

    // The short name and the full resource name both resolve.
    let by_full = kubectl
        .run(&["get", &format!("{}.{}", names::PLURAL, names::GROUP), "-n", &ns, "-o", "name"])
        .await
        .unwrap()
        .ok()
        .unwrap();
    assert_eq!(by_full.trim(), "myownshell.myownshell.io/team-shells");
}

#[tokio::test]
async fn the_apiserver_enforces_the_schema() {
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = create_namespace(&client, "schema").await.unwrap();
    let kubectl = cp.kubectl();
    let cases = [
        ("size: \"three\"", "spec.size", "must be of type integer"),
        ("size: -1", "spec.size", "should be greater than or equal to 0"),
        ("size: 1001", "spec.size", "should be less than or equal to 1000"),
        ("colour: blue", "unknown field \"spec.colour\"", ""),
        ("command: []", "spec.command", "should have at least 1 items"),
    ];
    for (spec_line, field, rule) in cases {
        let manifest = format!(
            "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata:\n  name: bad\nspec:\n  {spec_line}\n"
        );
        let out = kubectl.apply(&ns, &manifest).await.unwrap();
        assert!(!out.success, "{spec_line:?} was accepted: {}", out.stdout);
        assert!(out.stderr.contains(field) && out.stderr.contains(rule), "{spec_line:?}: {}", out.stderr);
    }
    let none = kubectl.run(&["get", "mos", "-n", &ns, "-o", "name"]).await.unwrap().ok().unwrap();
    assert_eq!(none.trim(), "", "nothing was persisted");
}

#[tokio::test]
async fn kubectl_explain_shows_the_field_docs() {
    let cp = shared();
    let out = cp.kubectl().run(&["explain", "mos.spec.size"]).await.unwrap().ok().unwrap();
    assert!(out.contains("Number of shell pods"), "{out}");
    assert!(out.contains("<integer>"), "{out}");
    let spec = cp.kubectl().run(&["explain", "mos.spec"]).await.unwrap().ok().unwrap();
    for field in ["command", "image", "resources", "size"] {
        assert!(spec.contains(field), "{field} missing from:\n{spec}");
    }
}

#[tokio::test]
async fn service_account_tokens_are_real_and_rbac_decides() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "identity").await.unwrap();
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    let user = service_account_user(&ns, "scraper");

    // TokenReview: the token authenticates as the ServiceAccount.
    let review =
        TokenReview { spec: TokenReviewSpec { token: Some(token.clone()), audiences: None }, ..TokenReview::default() };
    let reviewed = Api::<TokenReview>::all(admin.clone()).create(&PostParams::default(), &review).await.unwrap();
    let status = reviewed.status.unwrap();
    assert_eq!(status.authenticated, Some(true), "{:?}", status.error);
    assert_eq!(status.user.and_then(|u| u.username), Some(user.clone()));

    // A forged token does not.
    let forged = TokenReview {
        spec: TokenReviewSpec { token: Some(format!("{token}x")), audiences: None },
        ..TokenReview::default()
    };
    let reviewed = Api::<TokenReview>::all(admin.clone()).create(&PostParams::default(), &forged).await.unwrap();
    assert_ne!(reviewed.status.and_then(|s| s.authenticated), Some(true));

    // The token works as a client credential, and RBAC denies by default.
    let as_sa = cp.client_with_token(&token).unwrap();
    let err = Api::<MyOwnShell>::namespaced(as_sa, &ns).list(&ListParams::default()).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 403), "{err:?}");

    let sar = |user: String| SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some("/metrics".into()),
                verb: Some("get".into()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let sars: Api<SubjectAccessReview> = Api::all(admin.clone());
    let denied = sars.create(&PostParams::default(), &sar(user.clone())).await.unwrap();
    assert!(!denied.status.unwrap().allowed, "allowed before any binding");

    let role_name = format!("{ns}-metrics-reader");
    let role = rbac::non_resource_reader_role(&role_name, &["/metrics"]);
    Api::<ClusterRole>::all(admin.clone()).create(&PostParams::default(), &role).await.unwrap();
    let binding = rbac::cluster_role_binding(&role_name, &role_name, rbac::service_account_subject(&ns, "scraper"));
    Api::<ClusterRoleBinding>::all(admin.clone()).create(&PostParams::default(), &binding).await.unwrap();

    // RBAC reads bindings from an informer cache: poll until the decision flips.
    eventually("SubjectAccessReview to allow get /metrics", TIMEOUT, || {
        let sars = sars.clone();
        let user = user.clone();
        async move {
            let status = sars.create(&PostParams::default(), &sar(user)).await.map_err(|e| e.to_string())?.status;
            match status {
                Some(s) if s.allowed => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await
    .unwrap();
}
