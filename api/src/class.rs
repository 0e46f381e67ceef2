//! `MyOwnShellClass`: what a platform team offers (images, sizes, lifetimes, homes, recording,
//! how many each user may run) and, through RBAC's `use` verb on `myownshellclasses/<name>`,
//! to whom. Cluster-scoped, like StorageClass and IngressClass; one class may be the default
//! ([`crate::names::DEFAULT_CLASS_ANNOTATION`]). Doc comments become `kubectl explain mosc`.

// kube-derive takes one `printcolumn(...)` per column; clippy reads the repeats as duplicates.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::types::{ResourceList, ShellResources, quantity_map_schema, quantity_schema};

/// A kind of shell a platform team offers.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "myownshell.io",
    version = "v1alpha1",
    kind = "MyOwnShellClass",
    plural = "myownshellclasses",
    singular = "myownshellclass",
    shortname = "mosc",
    derive = "PartialEq",
    doc = "MyOwnShellClass says what a shell of its kind may be (images, resources, lifetime, home, recording) and how many each user may run; who may use it is RBAC's `use` verb on myownshellclasses/<name>.",
    printcolumn(
        name = "Default",
        type_ = "string",
        json_path = ".metadata.annotations.myownshell\\.io/is-default-class",
        description = "\"true\" for the class a shell without spec.className gets"
    ),
    printcolumn(
        name = "Image",
        type_ = "string",
        json_path = ".spec.images.default",
        description = "The image a shell of this class runs unless it names another allowed one"
    ),
    printcolumn(
        name = "Max-CPU",
        type_ = "string",
        json_path = ".spec.resources.max.cpu",
        description = "The most CPU a shell's limit may be"
    ),
    printcolumn(
        name = "Max-Memory",
        type_ = "string",
        json_path = ".spec.resources.max.memory",
        description = "The most memory a shell's limit may be"
    ),
    printcolumn(
        name = "Per-User",
        type_ = "integer",
        json_path = ".spec.maxRunningPerUser",
        description = "How many shells of this class one user may run at once"
    ),
    printcolumn(name = "Description", type_ = "string", json_path = ".spec.description", priority = 1),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MyOwnShellClassSpec {
    /// What this class is for, in a line users read in `kubectl myownshell classes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub description: Option<String>,

    /// Which images a shell of this class may run, and the one it runs by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<ClassImages>,

    /// The command a shell of this class runs when its spec names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub command: Option<Vec<String>>,

    /// The resources a shell gets by default and the most it may ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ClassResources>,

    /// The largest `spec.size` (pods per shell). Unset: the operator's maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
    pub max_size: Option<i32>,

    /// Lifetime defaults and caps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<ClassLifetime>,

    /// Home defaults and caps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<ClassHome>,

    /// Terminals of these shells: how long one nobody is attached to lives on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<ClassSessions>,

    /// Session recording through the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<ClassRecording>,

    /// How many shells of this class one user (a shell's owner) may run at once. A start beyond
    /// it waits, stopped, until one of theirs stops (its status names the running ones). Unset:
    /// no limit; 0: nobody may run one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_running_per_user: Option<i32>,

    /// How many shells of this class may run at once in one namespace, whoever owns them.
    /// Unset: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_running_per_namespace: Option<i32>,

    /// The network of these shells, beside the operator's own isolation (in only from the
    /// gateway; out only to DNS and public addresses): more ranges they may reach (within what
    /// the operator lets classes open), whether they reach public addresses, and namespaces
    /// whose pods may reach them. Unset: the operator's isolation as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<ClassNetwork>,

    /// Approval before a shell of this class starts (four eyes): how many, from whom, and for
    /// how long. A shell of the class runs only while approved (its `Approved` condition says by
    /// whom and until when); its owner can never approve it. Unset: no approval needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ClassApproval>,
}

/// Approval of a class's shells: a second person (or more) says yes before one starts, with
/// `kubectl myownshell approve NAME`. An approver must be named here and allowed by RBAC to
/// `approve` the shell (the `myownshell-approver` ClusterRole grants it).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassApproval {
    /// How many different approvers must approve. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub required: Option<i32>,

    /// Who may approve: users and groups, exactly as the cluster authenticates them. A shell's
    /// owner never approves their own, whatever groups they are in.
    pub approvers: ApprovalSubjects,

    /// An approval must say why (`kubectl myownshell approve NAME --reason …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_required: Option<bool>,

    /// How long an approval holds (`8h`, `30m`); a shell whose approvals run out stops then,
    /// warned ahead like any lifetime stop, and waits for new ones. Default 8h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub valid_for: Option<String>,
}

/// Users and groups who may approve.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalSubjects {
    /// User names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 1024)))]
    pub users: Option<Vec<String>>,

    /// Group names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 1024)))]
    pub groups: Option<Vec<String>>,
}

/// Images of a class.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassImages {
    /// Images a shell may run: exact references (`busybox:1.37.0`) or patterns where `*` stands
    /// for any run of characters (`registry.example.com/tools/*`). Unset: any image the operator
    /// allows. A pattern of only `*` allows everything; an empty list, nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 512)))]
    pub allowed: Option<Vec<String>>,

    /// The image of a shell whose spec names none; must be allowed. Unset: the operator's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub default: Option<String>,
}

/// Resources of a class.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassResources {
    /// Requests and limits of a shell whose spec sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<ShellResources>,

    /// The most a shell may ask for, by resource name (`cpu`, `memory`, `ephemeral-storage`):
    /// each request and limit must be at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map_schema")]
    pub max: Option<ResourceList>,
}

/// Lifetime of a class's shells. Durations as Kubernetes writes them (`30m`, `8h`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassLifetime {
    /// `spec.lifetime.idleTimeout` of a shell that sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub idle_timeout: Option<String>,

    /// The longest `spec.lifetime.idleTimeout` a shell may set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub max_idle_timeout: Option<String>,

    /// The longest `spec.lifetime.maxRunTime`, and the one a shell that sets none gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub max_run_time: Option<String>,

    /// How far ahead `kubectl myownshell extend` may push a stop (`spec.lifetime.extendedUntil`
    /// at most this long after the change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub max_extension: Option<String>,
}

/// Homes of a class's shells.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassHome {
    /// `spec.home.size` of a home that sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_schema")]
    pub default_size: Option<Quantity>,

    /// The largest `spec.home.size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_schema")]
    pub max_size: Option<Quantity>,

    /// StorageClasses a home may use; the first is the one a home that names none gets. Unset:
    /// any, and the cluster's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 253)))]
    pub storage_class_names: Option<Vec<String>>,
}

/// Terminals of a class's shells, which the session holder in each pod keeps.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassSessions {
    /// How long a terminal with nobody attached lives on before it ends with its processes (a
    /// build left running, an editor with unsaved work): reattach within it to pick it up again.
    /// Unset: the controller's `--session-detached-timeout` (1h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub detached_timeout: Option<String>,
}

/// Recording of a class's shells.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassRecording {
    /// Every gateway session of these shells is recorded (`spec.recordSessions` is set, and
    /// cannot be turned off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

/// The network of a class's shells. The controller keeps one NetworkPolicy per class that has
/// this, over that class's shell pods (labelled `myownshell.io/class`), in every namespace
/// opened to shells.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassNetwork {
    /// Addresses these shells may reach besides DNS and public addresses (a package mirror, a
    /// database in the cluster). Each range must lie inside one the operator lets classes open
    /// (the controller's `--class-egress-allowed`, none by default): a range outside is not
    /// opened, and the controller logs it naming the field. The cloud metadata address
    /// (169.254.169.254) is never opened unless `--class-egress-allowed` names it exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub egress: Option<Vec<ClassEgressRule>>,

    /// Whether these shells reach public addresses (every address but the private, shared,
    /// link-local and unique-local ranges). Default true; false leaves them DNS and `egress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_egress: Option<bool>,

    /// Namespaces whose pods may open connections to these shells, by name, besides the
    /// gateway's (a proxy in front of notebooks, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        inner(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))
    )]
    pub ingress_from_namespaces: Option<Vec<String>>,
}

/// Addresses a class's shells may reach, and on which ports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassEgressRule {
    /// Address ranges, `address/prefix` (`10.20.0.0/16`, `2001:db8::/32`; a single address is
    /// `/32` or `/128`).
    #[schemars(
        length(min = 1, max = 32),
        inner(length(min = 3, max = 43), regex(pattern = r"^[0-9a-fA-F:.]+/[0-9]{1,3}$"))
    )]
    pub cidrs: Vec<String>,

    /// Ports on those addresses. Unset: every port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub ports: Option<Vec<ClassPort>>,
}

/// A port a class's shells may reach.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassPort {
    /// The port number.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,

    /// `TCP` (default), `UDP` or `SCTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(TCP|UDP|SCTP)$"))]
    pub protocol: Option<String>,
}

/// What a shell's container runs, as the controller builds it and the webhook and `FitsClass`
/// judge it: the shell's own value, else its class's default, else the operator's. The one
/// place the three are resolved.
pub mod effective {
    use std::borrow::Cow;

    use super::MyOwnShellClassSpec;
    use crate::{MyOwnShellSpec, ShellResources, defaults};

    /// The image.
    pub fn image<'s>(spec: &'s MyOwnShellSpec, class: Option<&'s MyOwnShellClassSpec>) -> &'s str {
        let class_default = class.and_then(|c| c.images.as_ref()).and_then(|i| i.default.as_deref());
        spec.image.as_deref().or(class_default).unwrap_or(defaults::IMAGE)
    }

    /// The command.
    pub fn command(spec: &MyOwnShellSpec, class: Option<&MyOwnShellClassSpec>) -> Vec<String> {
        spec.command.clone().or_else(|| class.and_then(|c| c.command.clone())).unwrap_or_else(defaults::command)
    }

    /// The resources: borrowed from the shell or its class where either sets them (the webhook
    /// reads them at every review of a shell of a class, and needs no copy).
    pub fn resources<'s>(spec: &'s MyOwnShellSpec, class: Option<&'s MyOwnShellClassSpec>) -> Cow<'s, ShellResources> {
        let class_default = class.and_then(|c| c.resources.as_ref()).and_then(|r| r.default.as_ref());
        match spec.resources.as_ref().or(class_default) {
            Some(resources) => Cow::Borrowed(resources),
            None => Cow::Owned(defaults::resources()),
        }
    }
}

impl MyOwnShellClass {
    /// Whether the class carries the default-class annotation with `"true"`.
    pub fn is_default(&self) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::names::DEFAULT_CLASS_ANNOTATION))
            .is_some_and(|v| v == "true")
    }
}
