//! The `MyOwnShell` spec and status. Doc comments here become the schema descriptions that
//! `kubectl explain mos.spec` prints, so they are written for users.

// kube-derive takes one `printcolumn(...)` per column; clippy reads the repeats as duplicates.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// The hard ceiling the schema enforces on `spec.size`; the webhook's `--max-size` (default 50)
/// is the operational bound and sits below it.
pub const SIZE_SCHEMA_MAX: i32 = 1000;

/// A set of identical shell pods to `kubectl exec` into.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "myownshell.io",
    version = "v1alpha1",
    kind = "MyOwnShell",
    plural = "myownshells",
    singular = "myownshell",
    shortname = "mos",
    namespaced,
    status = "MyOwnShellStatus",
    derive = "PartialEq",
    doc = "MyOwnShell runs `size` shell pods (one Deployment) that users `kubectl exec` into.",
    scale(
        spec_replicas_path = ".spec.size",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size", description = "Shell pods asked for"),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Shell pods ready"
    ),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Available\")].status",
        description = "Whether the shells are available"
    ),
    printcolumn(
        name = "Class",
        type_ = "string",
        json_path = ".spec.className",
        description = "The shell's MyOwnShellClass"
    ),
    printcolumn(
        name = "Owner",
        type_ = "string",
        json_path = ".spec.owner",
        description = "Who created the shell (empty for shells made before owners existed)"
    ),
    printcolumn(
        name = "Up-to-date",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"UpToDate\")].status",
        description = "Whether the pods run this operator release's pod template (False: at the next quiet moment, start or `kubectl myownshell update`)"
    ),
    printcolumn(
        name = "State",
        type_ = "string",
        json_path = ".status.state",
        description = "Running, Stopped (by its lifetime or on request) or Paused (size 0)"
    ),
    printcolumn(
        name = "Stops",
        type_ = "string",
        json_path = ".status.nextStop.at",
        description = "When its lifetime stops it next, if it has one"
    ),
    printcolumn(
        name = "Home",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"HomeReady\")].reason",
        description = "The state of the shell's persistent home (HomeBound, HomePending, HomeNodeUnavailable, …); empty without spec.home"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
// The owner is for good: the admission webhook refuses a change, and so does the schema, so
// that even a cluster running without the webhook never hands a shell to someone else.
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.owner) == has(oldSelf.owner) && (!has(self.owner) || self.owner == oldSelf.owner) && has(self.ownerUID) == has(oldSelf.ownerUID) && (!has(self.ownerUID) || self.ownerUID == oldSelf.ownerUID)",
        "message": "spec.owner and spec.ownerUID cannot be changed: to hand a shell over, its new owner creates it again"
    },
    {
        "rule": "!has(self.home) || !has(self.size) || self.size <= 1",
        "message": "spec.size: must be 0 or 1 when spec.home is set: a home is one ReadWriteOnce volume, which one pod mounts"
    },
    {
        "rule": "!has(oldSelf.className) || (has(self.className) && self.className == oldSelf.className)",
        "message": "spec.className cannot be changed: a shell is of one class for good (create another shell of the other class)"
    },
    {
        "rule": "!has(oldSelf.home) || has(self.home)",
        "message": "spec.home cannot be removed: the shell's files are in it (delete the shell instead; spec.home.onDelete says whether its home goes too)"
    }
]))]
pub struct MyOwnShellSpec {
    /// The MyOwnShellClass this shell is of: what it may run and how many its owner may run at
    /// once (`kubectl myownshell classes` lists those you may use). Unset at creation: the
    /// default class, if the cluster has one. Fixed once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub class_name: Option<String>,

    /// Number of shell pods. 0 pauses the shell (keeps the object, runs no pods).
    /// Defaults to 1; the admission webhook enforces the operator's maximum (50 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
    pub size: Option<i32>,

    /// Container image of the shell, e.g. `busybox:1.37.0` or `registry.example.com/tools/shell@sha256:…`.
    /// Defaults to a small pinned busybox tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,

    /// Command the shell container runs (entrypoint and arguments). It must keep running:
    /// the default prints a ready line and then sleeps forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub command: Option<Vec<String>>,

    /// CPU and memory requests and limits of the shell container. Requests must not exceed
    /// limits. Defaults to small values (10m/16Mi requested, 200m/64Mi limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ShellResources>,

    /// Who the shell belongs to: the user name the cluster authenticated for the request that
    /// created it. Set by the admission webhook (a value given at creation is replaced) and never
    /// changed afterwards; to hand a shell over, its new owner creates it again. Only the owner,
    /// and the users and groups in `sharedWith`, may connect to its pods (exec, attach,
    /// port-forward, cp, debug), and only the owner may change the spec. Empty on shells created
    /// before owners existed: anyone the cluster's RBAC allows may connect to those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub owner: Option<String>,

    /// The owner's uid, as the cluster's authenticator gave it at creation (ServiceAccounts and
    /// most identity providers have one; client certificates do not). A connection by a user of
    /// the owner's name but another uid, say a ServiceAccount deleted and made again, is refused.
    /// Set by the admission webhook with `owner`; never changed afterwards.
    #[serde(default, rename = "ownerUID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub owner_uid: Option<String>,

    /// Who may connect to the shell besides its owner. Only the owner (or an administrator the
    /// operator names) may change it; a change takes effect for the next connection, without
    /// restarting the shell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_with: Option<SharedWith>,

    /// When the shell stops by itself: after a while without a new connection, or after running
    /// for a while. A stop removes the pods and keeps the shell (and its `size`);
    /// `kubectl myownshell start` brings them back. Unset: the shell runs until deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<Lifetime>,

    /// `true` stops the shell now (`kubectl myownshell stop`): its pods go, the shell and its
    /// `size` stay. `false` or unset: it runs (unless its lifetime stopped it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<bool>,

    /// Asks for the pod template of the running operator release now (`kubectl myownshell
    /// update`), which restarts the shell's pods: a template that changed with an operator
    /// upgrade is otherwise applied only at a quiet moment (`UpToDate=False` until then). Takes
    /// effect if later than the template the pods run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_requested_at: Option<Time>,

    /// A persistent home: a PersistentVolumeClaim named after the shell, mounted as `$HOME`
    /// (`/home/shell`), that keeps the user's files across stops, starts, `update`, operator
    /// upgrades and moves to another node. Unset: `$HOME` is `/tmp`, which every stop empties.
    /// A shell with a home runs at most one pod (`size` 0 or 1). Can be added to a shell, not
    /// removed from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<Home>,

    /// Record this shell's sessions in the browser gateway (`myownshell-gateway`): what the
    /// terminal shows and its window size, never what is typed, as asciicast v2 files that those
    /// RBAC lets `get` `myownshells/recordings` can list and download. The terminal says so when
    /// it opens. Unset or false: not recorded, unless the gateway records every session.
    /// Connections by `kubectl exec` are not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_sessions: Option<bool>,

    /// Approvals and rejections of this shell, for a class that asks for approval
    /// (`kubectl myownshell approve NAME` and `reject NAME` add them). Each names who gave it
    /// and when, as the admission webhook records them (what a request says there is replaced):
    /// only an approver of the class, allowed by RBAC to `approve` the shell and not its owner,
    /// may add one, only their own, and nobody may change one once given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub approvals: Option<Vec<Approval>>,
}

/// One approver's word on a shell.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// Who gave it: set by the admission webhook to the user who added it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub by: Option<String>,

    /// Why they may: `user` (named among the class's approvers) or `group:NAME` (in one of its
    /// groups). Set by the admission webhook; an approval whose approver the class no longer
    /// names counts no more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub via: Option<String>,

    /// When: set by the admission webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Time>,

    /// `Approve` or `Reject`. A rejection holds the shell stopped until its author takes it
    /// back (removes it).
    pub decision: Decision,

    /// Why, in the approver's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub reason: Option<String>,
}

/// An approver's decision.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Decision {
    /// The shell may run (with the other approvals its class requires).
    #[default]
    Approve,
    /// The shell may not run.
    Reject,
}

/// A shell's persistent home: one PersistentVolumeClaim (ReadWriteOnce), owned by the shell.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Home {
    /// How much the home holds, e.g. `1Gi`. Defaults to the operator's default (1Gi unless its
    /// `--home-default-size` says otherwise) and may not exceed its maximum. Growing it expands
    /// the claim where its storage class allows (`status.home` says when a restart finishes
    /// it); shrinking it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_schema")]
    pub size: Option<Quantity>,

    /// The StorageClass of the claim. Unset: the cluster's default class. Fixed once the shell
    /// has a home (a claim's class cannot change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,

    /// What happens to the home when the shell is deleted: `Delete` (the default: the files go
    /// with the shell, also when `lifetime.deletePausedAfter` deletes it) or `Retain` (the claim
    /// stays, labelled `myownshell.io/retained-home`, and a new shell of the same name and owner
    /// takes it up again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_delete: Option<HomeOnDelete>,
}

/// What happens to a shell's home when the shell is deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum HomeOnDelete {
    /// The claim, and the files, are deleted with the shell.
    #[default]
    Delete,
    /// The claim stays for a new shell of the same name and owner (or an administrator).
    Retain,
}

/// When a shell stops by itself. Durations are written as Kubernetes writes them: `40s`, `30m`,
/// `1h30m`, `168h`. Changing them never restarts a running shell.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lifetime {
    /// Stop after this long without a new connection (exec, attach, port-forward, cp, debug),
    /// counted from the last one, or from the start if there was none. A connection that stays
    /// open does not count as a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub idle_timeout: Option<String>,

    /// Stop after running this long since the last start, whatever the connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub max_run_time: Option<String>,

    /// Warn this long before a stop (an Event and the `Stopping` condition), so the owner can
    /// extend it. Shorter than the timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub warn_before: Option<String>,

    /// Delete a stopped shell after it has been stopped this long. Unset: stopped shells stay
    /// until deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub delete_paused_after: Option<String>,

    /// No idle or run-time stop before this time (`kubectl myownshell extend` sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_until: Option<Time>,

    /// When the owner last started the shell (`kubectl myownshell start` sets it): a stop from
    /// before it no longer holds, and the clocks run from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<Time>,
}

/// Users and groups who may connect to a shell besides its owner.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SharedWith {
    /// User names, exactly as the cluster authenticates them (`alice@example.com`,
    /// `system:serviceaccount:team:ci`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 1024)))]
    pub users: Option<Vec<String>>,

    /// Group names, exactly as the cluster authenticates them. `system:authenticated` opens the
    /// shell to anyone the cluster's RBAC lets connect to pods in its namespace (the behaviour
    /// of shells without an owner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 1024)))]
    pub groups: Option<Vec<String>>,
}

/// Resource names to quantities, e.g. `{cpu: 250m, memory: 64Mi}`.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Compute resources of the shell container: a narrower `ResourceRequirements` (no claims).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShellResources {
    /// Minimum resources reserved for the shell, by name (`cpu`, `memory`, `ephemeral-storage`),
    /// e.g. `{cpu: 10m, memory: 16Mi}`. Each must be at most the matching limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map_schema")]
    pub requests: Option<ResourceList>,

    /// Maximum resources the shell may use, by name (`cpu`, `memory`, `ephemeral-storage`),
    /// e.g. `{cpu: 200m, memory: 64Mi}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map_schema")]
    pub limits: Option<ResourceList>,
}

/// A map of Kubernetes quantities (`"250m"`, `"64Mi"`, or plain numbers), without the very long
/// upstream `Quantity` description that would drown `kubectl explain`.
pub(crate) fn quantity_map_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": { "x-kubernetes-int-or-string": true }
    })
}

/// A Kubernetes quantity (`"1Gi"`, `"500Mi"`, or a plain number of bytes).
pub(crate) fn quantity_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-int-or-string": true })
}

/// Observed state, written by the controller through the status subresource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MyOwnShellStatus {
    /// Shell pods that exist (as reported by the Deployment). While the pods roll out
    /// (`Progressing=True`), a change of this count alone is written with the rollout's next
    /// change (a pod ready, the rollout done), so it may trail the Deployment's by a step.
    #[serde(default)]
    pub replicas: i32,

    /// Shell pods that are ready to be exec'd into.
    #[serde(default)]
    pub ready_replicas: i32,

    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Label selector of the shell pods, in string form (used by the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,

    /// The uid of the Deployment this controller created for this object. With the
    /// Deployment's controller ownerReference it is how the controller knows the Deployment is
    /// its own: a Deployment that lost that reference is still recognised by this uid (which
    /// only the apiserver assigns and only the status subresource can record), never by
    /// labels or field managers that anyone who can create a Deployment could copy.
    #[serde(default, rename = "deploymentUID", skip_serializing_if = "Option::is_none")]
    pub deployment_uid: Option<String>,

    /// Latest observations: `Available`, `Progressing` and `Degraded`, one entry per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// The latest connection into one of the shell's pods that was let in (exec, attach,
    /// port-forward, cp, debug), as the admission webhook saw it. Written at most once per shell
    /// every few seconds, so after a burst of connections it names the last of the burst a few
    /// seconds late. Absent until the first connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_connection: Option<Connection>,

    /// `Running`, `Stopped` (by its lifetime or on request: see `stopped`) or `Paused` (`size` 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,

    /// When the shell last started running (created, started again, or resized from 0): the
    /// clock of `lifetime.maxRunTime`, and of `lifetime.idleTimeout` until a first connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,

    /// Why and when the shell was stopped; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stop>,

    /// When its lifetime stops the shell next, and why; absent without a lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_stop: Option<NextStop>,

    /// The home's claim as last seen; absent without `spec.home`. `HomeReady` in `conditions`
    /// says whether the shell can use it, and why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<HomeStatus>,
}

/// What the controller last saw of a shell's home claim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HomeStatus {
    /// The PersistentVolumeClaim (in the shell's namespace).
    pub claim_name: String,
    /// The claim's phase (`Pending`, `Bound`, `Lost`), or `Missing` before it exists.
    pub phase: String,
    /// What the volume holds now (the claim's `status.capacity.storage`), once bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Quantity>,
    /// The node the volume lives on, for volumes tied to one node (local storage): the shell's
    /// pod can only run there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// A stop.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stop {
    /// `Idle` (no new connection for `idleTimeout`), `MaxRunTime`, or `Requested`
    /// (`spec.stopped`).
    pub reason: String,
    /// When.
    pub at: Time,
    /// In words, for people.
    #[serde(default)]
    pub message: String,
}

/// The next stop a lifetime has in store.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NextStop {
    /// When.
    pub at: Time,
    /// `Idle` or `MaxRunTime`.
    pub reason: String,
    /// Whether the warning (`warnBefore` ahead) has been given for this stop.
    #[serde(default)]
    pub warned: bool,
}

/// One connection into a shell pod.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    /// Who connected (the user name the cluster authenticated).
    pub user: String,
    /// When the connection was admitted.
    pub time: Time,
    /// The pod connected to.
    pub pod: String,
    /// How: `exec` (also `kubectl cp`), `attach`, `portforward`, `proxy` or `debug` (an
    /// ephemeral container).
    pub kind: String,
}
