//! Who is asking and may they, for every HTTP endpoint of the operator: kube-rbac-proxy style
//! authentication and authorization as a tower layer, the way the webhook, the controller, the
//! gateway and the standalone `myownshell-rbac-proxy` all decide it. Modules in kube-rbac-proxy's
//! split: authentication ([`authn`]: client certificates and TokenReview; [`request_header`]: an
//! authenticating proxy's headers; [`oidc`]: an OpenID Connect issuer's ID tokens; [`token`],
//! [`user`]), authorization ([`authz`],
//! [`attributes`], [`config`], [`paths`]), their [`cache`], and serving ([`layer`], [`denials`],
//! [`transport`], [`secure_server`], [`metrics_args`]).
//!
//! A request is let through only if the cluster says so:
//! 1. **Authentication**: a client certificate that chains to `--client-ca-file` (user = CN,
//!    groups = O) is checked first; otherwise `Authorization: Bearer <token>` goes to a
//!    TokenReview (audiences configurable, default the apiserver's).
//! 2. **Authorization**: a SubjectAccessReview for the user, by default `get`/`create`/… (from
//!    the HTTP method) on the non-resource URL path, or for the resource attributes of a
//!    kube-rbac-proxy `--config-file`; optional static allow rules skip the review.
//! 3. Answers: no or bad credentials → 401 with `WWW-Authenticate: Bearer`; denied → 403 naming
//!    the user and the missing permission; apiserver unreachable → 503, review error → 500.
//!    It never fails open. The user goes into the request extensions as [`AuthenticatedUser`].
//!    Each refusal is logged at debug; at info, one line per reason sums up each minute
//!    ([`denials`]).
//!
//! Before anything else, `X-Remote-*` and `Impersonate-*` headers from the caller are removed;
//! the caller's `Authorization` header never reaches the inner service or the upstream. With
//! [`AuthOptions::identity_headers`] the authenticated user and groups are sent upstream instead.
//!
//! Results are cached by a SHA-256 of the token (never the token): authentication for 2 min
//! (never past the token's `exp`), allow for 5 min, deny for 30 s, bounded in size, with
//! concurrent identical misses sharing one API call.
//!
//! # Serving `/metrics` from a binary (one call)
//! ```no_run
//! # async fn example(client: kube::Client, shutdown: tokio_util::sync::CancellationToken) -> Result<(), myownshell_auth::ServeError> {
//! use axum::{Router, routing::get};
//! use myownshell_auth::{SecureServingOptions, serve_secure_metrics};
//!
//! let metrics = Router::new().route("/metrics", get(|| async { "# EOF\n" }));
//! let bind = "0.0.0.0:8443".parse().expect("a valid address");
//! // Self-signed unless `options.tls` names certificate files (reloaded when they change).
//! serve_secure_metrics(bind, client, metrics, SecureServingOptions::default(), shutdown).await
//! # }
//! ```
//! Binaries can `#[command(flatten)]` [`MetricsAuthArgs`] into their clap `Args` and pass
//! `args.metrics.serving_options()`, so both offer the same `--metrics-cert-path`,
//! `--metrics-client-ca-file`, `--metrics-auth-token-audiences` and cache-lifetime flags.
//!
//! The kube client's identity needs `create` on `tokenreviews.authentication.k8s.io` and
//! `subjectaccessreviews.authorization.k8s.io` (the `system:auth-delegator` ClusterRole);
//! scrapers need `get` on the non-resource URL `/metrics`.
//!
//! # As a layer in your own server
//! `RbacAuth::new(client, AuthOptions::default())` is a `tower::Layer`: `router.layer(auth)`.
//! Serve it with `myownshell_runtime::server::serve_tls` so client certificates reach it.
//!
//! # Standalone
//! The `myownshell-rbac-proxy` binary (its own crate, `rbac-proxy/`) puts the same layer in front
//! of an HTTP upstream with kube-rbac-proxy's flags.

#![warn(missing_docs)]

pub mod attributes;
pub mod authn;
pub mod authz;
pub mod borrowed;
pub mod cache;
pub mod config;
pub mod denials;
pub mod layer;
pub mod metrics_args;
pub mod oidc;
pub mod paths;
pub mod request_header;
pub mod secure_server;
pub mod token;
pub mod transport;
pub mod user;

pub use layer::{AuthOptions, IdentityHeaders, RbacAuth, ReviewCounts};
pub use metrics_args::{MetricsAuthArgs, MetricsService};
pub use secure_server::{SecureServer, SecureServingOptions, ServeError, serve_secure_metrics};
pub use transport::TlsFiles;
pub use user::{AuthMethod, AuthenticatedUser};
