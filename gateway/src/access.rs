//! Access lost is access ended: the user of every open terminal is asked again whether they may
//! still connect, with the look at its shell every `--activity-interval` ([`crate::activity`])
//! and on every reattach, and a terminal whose user may not is closed, saying why. They may while
//! all three hold:
//!
//! - the cluster still accepts their sign-in: the token they opened it with, asked of
//!   TokenReview again (through the cache, `--auth-cache-ttl`), so a token revoked or a
//!   ServiceAccount deleted ends its terminals (an authenticating proxy's users carry no token:
//!   the proxy answers for them);
//! - the shell still lets them in: its owner, `spec.sharedWith`, the administrators of
//!   `--admin-groups` (`myownshell_api::access`, the connect gate's own table), the same shell
//!   (not one made again under its name);
//! - RBAC still lets them exec into its pod (a SubjectAccessReview, cached briefly).
//!
//! `kubectl exec` keeps its stream open through any of these changes; the gateway does better.
//! No answer from the apiserver is not a change: the terminal goes on, and the next look asks
//! again (a new terminal still needs the answers).

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use myownshell_api::MyOwnShell;
use myownshell_api::access::{Asker, Sharing, may_connect};
use myownshell_auth::AuthenticatedUser;
use myownshell_auth::attributes::{RequestAttributes, ResourceRequest};
use myownshell_auth::authn::{ReviewCounters, TokenAuthenticator, TokenOutcome};
use myownshell_auth::authz::{Authorizer, AuthzCacheOptions, Decision};
use secrecy::{ExposeSecret, SecretString};

/// Who opened a terminal, and the credential to ask about again.
#[derive(Debug, Clone)]
pub struct Credential {
    /// The user as the cluster authenticated them.
    pub user: AuthenticatedUser,
    /// The token they signed in with (none for an authenticating proxy's users).
    pub token: Option<SecretString>,
}

/// Where a terminal is: the shell, its uid when the terminal opened, and the pod.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    /// The shell as it is now.
    pub shell: &'a MyOwnShell,
    /// Its uid when the terminal opened.
    pub uid: Option<&'a str>,
    /// The pod the terminal runs in.
    pub pod: &'a str,
}

/// Asks again.
pub struct AccessCheck {
    authorizer: Authorizer,
    admin_groups: Vec<String>,
}

/// How long RBAC's answer about an open terminal is trusted: a grant taken away ends the
/// terminal within this and the look's interval.
const RBAC_TTL: Duration = Duration::from_secs(10);

impl AccessCheck {
    /// Ask through `client`, with `admin_groups` as the administrators.
    pub fn new(client: Client, admin_groups: Vec<String>) -> Self {
        let options = AuthzCacheOptions { allow_ttl: RBAC_TTL, deny_ttl: RBAC_TTL, ..AuthzCacheOptions::default() };
        let authorizer = Authorizer::new(client, Vec::new(), options, Arc::new(ReviewCounters::default()));
        Self { authorizer, admin_groups }
    }

    /// Why `who` may no longer use a terminal `at` a shell, if they may not.
    pub async fn refusal(&self, tokens: &TokenAuthenticator, who: &Credential, at: At<'_>) -> Option<String> {
        let shell = at.shell;
        let (namespace, name) = (
            shell.metadata.namespace.as_deref().unwrap_or_default(),
            shell.metadata.name.as_deref().unwrap_or_default(),
        );
        if at.uid.is_some() && shell.metadata.uid.as_deref() != at.uid {
            return Some(format!("shell {namespace}/{name} was deleted (one of the same name is another shell)"));
        }
        if let Some(token) = &who.token
            && let Ok(TokenOutcome::Rejected) = tokens.authenticate(token.expose_secret()).await
        {
            return Some(
                "the cluster no longer accepts your sign-in (its token expired or was revoked, or its ServiceAccount deleted); sign in again"
                    .to_owned(),
            );
        }
        let user = &who.user;
        let asker = Asker { name: &user.name, uid: user.uid.as_deref(), groups: &user.groups };
        if may_connect(&Sharing::of(&shell.spec), &asker, &self.admin_groups).is_none() {
            return Some(format!(
                "you may no longer connect to shell {namespace}/{name}: its owner {} no longer shares it with you",
                shell.spec.owner.as_deref().unwrap_or_default()
            ));
        }
        let exec = RequestAttributes::Resource(ResourceRequest {
            verb: "create".to_owned(),
            namespace: Some(namespace.to_owned()),
            resource: "pods".to_owned(),
            subresource: Some("exec".to_owned()),
            name: Some(at.pod.to_owned()),
            ..ResourceRequest::default()
        });
        match self.authorizer.authorize(user, &exec).await {
            Ok(Decision::Deny { .. }) => {
                Some(format!("RBAC no longer lets you exec into the pods of namespace {namespace}"))
            }
            Ok(Decision::Allow) | Err(_) => None,
        }
    }
}
