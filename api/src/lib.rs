//! The `MyOwnShell` custom resource: its Rust types, the fixed names every other crate and the
//! manifests rely on, the defaults shared by the webhook and the controller, resource quantities
//! as the apiserver reads and writes them (also shared by both), and CRD generation.

#![warn(missing_docs)]

pub mod access;
pub mod approval;
pub mod class;
pub mod connect;
pub mod crd;
pub mod defaults;
pub mod image_pattern;
pub mod last_connection;
pub mod lifecycle;
pub mod names;
pub mod quantity;
mod types;

pub use class::{
    ApprovalSubjects, ClassApproval, ClassEgressRule, ClassHome, ClassImages, ClassLifetime, ClassNetwork, ClassPort,
    ClassRecording, ClassResources, ClassSessions, MyOwnShellClass, MyOwnShellClassSpec,
};
pub use types::{
    Approval, Connection, Decision, Home, HomeOnDelete, HomeStatus, Lifetime, MyOwnShell, MyOwnShellSpec,
    MyOwnShellStatus, NextStop, ResourceList, SIZE_SCHEMA_MAX, SharedWith, ShellResources, Stop,
};
