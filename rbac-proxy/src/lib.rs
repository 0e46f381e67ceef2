//! `myownshell-rbac-proxy`, the standalone sidecar: [`myownshell_auth`]'s layer (TokenReview
//! or a client certificate, then SubjectAccessReview) in front of an HTTP upstream, with
//! kube-rbac-proxy's flags ([`args::Args`]), run by [`run::run`], forwarding by [`proxy`].

#![warn(missing_docs)]

pub mod args;
pub mod proxy;
pub mod run;
