//! Who may connect to a shell, as pure functions: which shell a pod belongs to (by its name),
//! and whether a user may connect to it or change its spec.
//!
//! A shell's pods are told by their names, which nobody can change: the Deployment of shell
//! `NAME` makes ReplicaSet `NAME-<pod-template-hash>`, whose pods are named
//! `NAME-<hash>-<5 random>`; the apiserver cuts a generated name's base to 58 characters, so a
//! long name keeps only its first 58 characters and is 63 long. Labels and ownerReferences
//! would not do: a namespace editor can change both. The connect webhook's matchCondition
//! (`config/webhook/webhook_configurations.yaml`) sends only pods named so, and who may connect
//! is decided again, row for row, by the `ValidatingAdmissionPolicy` in
//! `config/policy/services_proxy.yaml` for requests proxied through a Service (a test holds the
//! two to one table).

use std::collections::BTreeMap;
use std::sync::Arc;

use myownshell_api::{MyOwnShell, MyOwnShellSpec};

use crate::review::user::UserInfo;

// The name rule has one source: the constants below. The CEL of the connect webhook's
// matchCondition (`config/webhook/webhook_configurations.yaml`) and of the ReplicaSet names in
// `config/policy/shell_names.yaml` is written from them, and the test
// `the_name_rule_has_one_source` fails when either spells it differently.

/// The characters of a `pod-template-hash` (a decimal number, letter-encoded), as a regular
/// expression's class.
pub const HASH_CLASS: &str = "[4-9bcdf]";
/// The characters of the random suffix of a generated name, as a regular expression's class.
pub const SUFFIX_CLASS: &str = "[bcdfghjklmnpqrstvwxz24-9]";
/// The longest `pod-template-hash`.
pub const MAX_HASH_LEN: usize = 10;
/// How much of a generated name's base the apiserver keeps (63 minus the 5-character suffix).
pub const MAX_GENERATED_BASE: usize = 58;
/// The length of a generated name whose base was cut.
pub const CUT_NAME_LEN: usize = MAX_GENERATED_BASE + 5;

/// Which bytes a class of [`HASH_CLASS`]'s form holds: `[...]` of single characters and `a-b`
/// ranges. Built at compile time, so the matcher reads a table.
const fn class_table(class: &str) -> [bool; 256] {
    let bytes = class.as_bytes();
    let mut table = [false; 256];
    let end = bytes.len() - 1; // the closing `]`
    let mut i = 1; // after the opening `[`
    while i < end {
        if i + 2 < end && bytes[i + 1] == b'-' {
            let mut c = bytes[i];
            while c <= bytes[i + 2] {
                table[c as usize] = true;
                c += 1;
            }
            i += 3;
        } else {
            table[bytes[i] as usize] = true;
            i += 1;
        }
    }
    table
}
static HASH_CHARS: [bool; 256] = class_table(HASH_CLASS);
static SUFFIX_CHARS: [bool; 256] = class_table(SUFFIX_CLASS);

/// The CEL regular expression of "named as a Deployment's pod" (the matchCondition of the
/// connect webhook), from the constants above.
pub fn deployment_pod_pattern() -> String {
    format!("^.+-{HASH_CLASS}{{1,{MAX_HASH_LEN}}}-{SUFFIX_CLASS}{{5}}$")
}

/// The pod a request names, read as the apiserver's pod proxy reads it
/// (`k8s.io/apimachinery/pkg/util/net.SplitSchemeNamePort`): for `pods/proxy` the request's
/// name is the raw path segment, `POD`, `POD:PORT` or `SCHEME:POD:PORT`, and all three reach the
/// same pod. A pod's own name has no colon, so every other connection's name comes back as it
/// is. A name of four or more parts is no proxy request the apiserver serves; it is kept whole.
/// The webhook's matchCondition reads it the same way (any of the parts), and
/// `tests/tests/access.rs` tries every form of [`PROXY_NAME_FORMS`] through the apiserver.
pub fn connected_pod(name: &str) -> &str {
    let mut parts = name.split(':');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(pod), None, None, None) | (Some(pod), Some(_), None, None) | (Some(_), Some(pod), Some(_), None) => pod,
        _ => name,
    }
}

/// Every form in which a request can name pod `{pod}` (the proxy's port and scheme), for the
/// unit test of [`connected_pod`] and the real-apiserver test of the webhook.
pub const PROXY_NAME_FORMS: &[&str] =
    &["{pod}", "{pod}:8080", "{pod}:", "http:{pod}:80", "https:{pod}:8443", "https:{pod}:", ":{pod}:8080"];

/// What a pod name would start with if it were a pod of shell `shell`.
fn pod_prefix(shell: &str) -> String {
    let mut prefix = format!("{shell}-");
    if prefix.len() > MAX_GENERATED_BASE {
        // Names are DNS subdomains (ASCII), so any byte index is a character boundary.
        prefix.truncate(MAX_GENERATED_BASE);
    }
    prefix
}

/// `rest` is `<hash>-<suffix>` (`hash_min` to 10 hash characters, the dash optional when
/// `dash_optional`).
fn hash_and_suffix(rest: &str, hash_min: usize, dash_optional: bool) -> bool {
    let bytes = rest.as_bytes();
    let Some(split) = bytes.len().checked_sub(5) else { return false };
    let (head, suffix) = bytes.split_at(split);
    if !suffix.iter().all(|&b| SUFFIX_CHARS[usize::from(b)]) {
        return false;
    }
    let hash = match head.strip_suffix(b"-") {
        Some(hash) => hash,
        None if dash_optional => head,
        None => return false,
    };
    (hash_min..=MAX_HASH_LEN).contains(&hash.len()) && hash.iter().all(|&b| HASH_CHARS[usize::from(b)])
}

/// Whether `pod` is named as a pod of shell `shell`'s Deployment is.
pub fn is_pod_of(shell: &str, pod: &str) -> bool {
    let prefix = pod_prefix(shell);
    let Some(rest) = pod.strip_prefix(prefix.as_str()) else { return false };
    hash_and_suffix(rest, 1, false) || (pod.len() == CUT_NAME_LEN && hash_and_suffix(rest, 0, true))
}

/// What decides who may connect to one shell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellAccess {
    /// The shell's name.
    pub name: String,
    /// The shell's uid (for the Events and the status its connections leave).
    pub uid: Option<String>,
    /// `spec.owner`; `None` for shells made before owners existed.
    pub owner: Option<String>,
    /// `spec.ownerUID`, when the authenticator gave one.
    pub owner_uid: Option<String>,
    /// `spec.sharedWith.users`.
    pub users: Vec<String>,
    /// `spec.sharedWith.groups`.
    pub groups: Vec<String>,
    /// The whole spec of a shell with a class (`None` for the others, which need none of it):
    /// `kubectl scale` sends a `Scale`, not the spec, and a scale is held to the class's rules
    /// as any change of `spec.size` is (its `maxSize`, and at a start everything the class
    /// says, and its `use`).
    pub classed: Option<ClassedSpec>,
}

/// The spec of a shell with a class, shared between the index's entries.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassedSpec(pub Arc<MyOwnShellSpec>);

// A spec is plain data read from JSON (no floating-point NaN can be in it), so its equality is
// an equivalence, as the index's entries need.
impl Eq for ClassedSpec {}

impl ShellAccess {
    /// What `shell`'s spec says.
    pub fn of(shell: &MyOwnShell) -> Self {
        let shared = shell.spec.shared_with.clone().unwrap_or_default();
        Self {
            name: shell.metadata.name.clone().unwrap_or_default(),
            uid: shell.metadata.uid.clone(),
            owner: shell.spec.owner.clone(),
            owner_uid: shell.spec.owner_uid.clone().filter(|u| !u.is_empty()),
            users: shared.users.unwrap_or_default(),
            groups: shared.groups.unwrap_or_default(),
            classed: shell.spec.class_name.is_some().then(|| ClassedSpec(Arc::new(shell.spec.clone()))),
        }
    }

    /// Who may connect, for a refusal's message: `its owner alice` and what it is shared with.
    pub fn who_may_connect(&self) -> String {
        let Some(owner) = &self.owner else { return "anyone RBAC allows".to_owned() };
        let mut who = format!("its owner {owner}");
        if !self.users.is_empty() {
            who.push_str(&format!(", the users {}", self.users.join(", ")));
        }
        if !self.groups.is_empty() {
            who.push_str(&format!(", members of {}", self.groups.join(", ")));
        }
        who
    }
}

pub use myownshell_api::access::Grant;
use myownshell_api::access::{Asker, Sharing};

/// The administrators' groups of the webhook's `--admin-groups` default, which the admission
/// policies of `config/policy` name too (keep them in step when the flag changes).
pub const DEFAULT_ADMIN_GROUPS: &[&str] = &["system:masters"];

impl ShellAccess {
    /// Whom it lets in, for [`myownshell_api::access`].
    fn sharing(&self) -> Sharing<'_> {
        Sharing {
            owner: self.owner.as_deref(),
            owner_uid: self.owner_uid.as_deref(),
            users: &self.users,
            groups: &self.groups,
        }
    }
}

/// `user` as [`myownshell_api::access`] reads them.
fn asker<'u>(user: &'u UserInfo<'_>) -> Asker<'u, std::borrow::Cow<'u, str>> {
    Asker { name: &user.username, uid: user.uid(), groups: &user.groups }
}

/// Whether `user` is the owner of `shell`: the same name, and the same uid where both have one.
fn is_owner(shell: &ShellAccess, user: &UserInfo<'_>) -> bool {
    myownshell_api::access::is_owner(&shell.sharing(), &asker(user))
}

/// Whether `user` may connect to `shell`'s pods, and why: the owner and those the shell is
/// shared with, and (break-glass) the members of `admin_groups` ([`myownshell_api::access`]).
pub fn may_connect<G: AsRef<str>>(shell: &ShellAccess, user: &UserInfo<'_>, admin_groups: &[G]) -> Option<Grant> {
    myownshell_api::access::may_connect(&shell.sharing(), &asker(user), admin_groups)
}

/// Whether `user` may change the spec of a shell owned by `owner` (with `owner_uid`): the owner,
/// or a member of one of `admin_groups`. A shell without an owner: anyone RBAC allows.
pub fn may_change_spec(
    owner: Option<&str>,
    owner_uid: Option<&str>,
    user: &UserInfo<'_>,
    admin_groups: &[String],
) -> bool {
    let Some(owner) = owner else { return true };
    let shell = ShellAccess {
        owner: Some(owner.to_owned()),
        owner_uid: owner_uid.filter(|u| !u.is_empty()).map(str::to_owned),
        ..ShellAccess::default()
    };
    is_owner(&shell, user) || admin_groups.iter().any(|g| user.in_group(g))
}

/// One row of the decision table: a shell's owner and shares, a requester, and whether they may
/// connect.
#[derive(Debug, Clone, Copy)]
pub struct DecisionCase {
    /// What the row shows.
    pub what: &'static str,
    /// `spec.owner` (`None`: a shell from before owners).
    pub owner: Option<&'static str>,
    /// `spec.ownerUID`.
    pub owner_uid: Option<&'static str>,
    /// `spec.sharedWith.users`.
    pub users: &'static [&'static str],
    /// `spec.sharedWith.groups`.
    pub groups: &'static [&'static str],
    /// Who asks.
    pub user: &'static str,
    /// Their uid, if the authenticator gives one.
    pub user_uid: Option<&'static str>,
    /// Their groups.
    pub user_groups: &'static [&'static str],
    /// Why they may connect; `None`: they may not.
    pub grant: Option<Grant>,
}

const AUTHENTICATED: &[&str] = &["system:authenticated"];

/// Who may connect, as a table: the unit test holds [`may_connect`] to it, and
/// `tests/tests/access.rs` asks every row of the real apiserver twice: an exec through the
/// webhook, and a request proxied through a Service, which the `ValidatingAdmissionPolicy`
/// `config/policy/services_proxy.yaml` decides in CEL, so the two can never disagree.
pub const DECISION_TABLE: &[DecisionCase] = &[
    DecisionCase {
        what: "no owner: anyone",
        owner: None,
        owner_uid: None,
        users: &[],
        groups: &[],
        user: "bob",
        user_uid: None,
        user_groups: AUTHENTICATED,
        grant: Some(Grant::NoOwner),
    },
    DecisionCase {
        what: "the owner",
        owner: Some("alice"),
        owner_uid: None,
        users: &[],
        groups: &[],
        user: "alice",
        user_uid: None,
        user_groups: AUTHENTICATED,
        grant: Some(Grant::Owner),
    },
    DecisionCase {
        what: "someone else",
        owner: Some("alice"),
        owner_uid: None,
        users: &[],
        groups: &[],
        user: "bob",
        user_uid: None,
        user_groups: AUTHENTICATED,
        grant: None,
    },
    DecisionCase {
        what: "the owner, same uid",
        owner: Some("alice"),
        owner_uid: Some("u1"),
        users: &[],
        groups: &[],
        user: "alice",
        user_uid: Some("u1"),
        user_groups: AUTHENTICATED,
        grant: Some(Grant::Owner),
    },
    DecisionCase {
        what: "the owner's name, another uid",
        owner: Some("alice"),
        owner_uid: Some("u1"),
        users: &[],
        groups: &[],
        user: "alice",
        user_uid: Some("u2"),
        user_groups: AUTHENTICATED,
        grant: None,
    },
    DecisionCase {
        what: "the owner's name without a uid (a certificate)",
        owner: Some("alice"),
        owner_uid: Some("u1"),
        users: &[],
        groups: &[],
        user: "alice",
        user_uid: None,
        user_groups: AUTHENTICATED,
        grant: Some(Grant::Owner),
    },
    DecisionCase {
        what: "a shared user",
        owner: Some("alice"),
        owner_uid: None,
        users: &["bob"],
        groups: &[],
        user: "bob",
        user_uid: None,
        user_groups: AUTHENTICATED,
        grant: Some(Grant::SharedUser),
    },
    DecisionCase {
        what: "another user",
        owner: Some("alice"),
        owner_uid: None,
        users: &["bob"],
        groups: &[],
        user: "carol",
        user_uid: None,
        user_groups: AUTHENTICATED,
        grant: None,
    },
    DecisionCase {
        what: "a member of a shared group",
        owner: Some("alice"),
        owner_uid: None,
        users: &[],
        groups: &["devs"],
        user: "carol",
        user_uid: None,
        user_groups: &["devs", "system:authenticated"],
        grant: Some(Grant::SharedGroup),
    },
    DecisionCase {
        what: "not a member",
        owner: Some("alice"),
        owner_uid: None,
        users: &[],
        groups: &["devs"],
        user: "carol",
        user_uid: None,
        user_groups: AUTHENTICATED,
        grant: None,
    },
    DecisionCase {
        what: "shared with everyone signed in",
        owner: Some("alice"),
        owner_uid: None,
        users: &[],
        groups: &["system:authenticated"],
        user: "bob",
        user_uid: None,
        user_groups: AUTHENTICATED,
        grant: Some(Grant::SharedGroup),
    },
    DecisionCase {
        what: "names are exact",
        owner: Some("alice"),
        owner_uid: None,
        users: &["Bob"],
        groups: &[],
        user: "bob",
        user_uid: None,
        user_groups: AUTHENTICATED,
        grant: None,
    },
    DecisionCase {
        what: "a group is not a user",
        owner: Some("alice"),
        owner_uid: None,
        users: &[],
        groups: &["bob"],
        user: "bob",
        user_uid: None,
        user_groups: AUTHENTICATED,
        grant: None,
    },
    DecisionCase {
        what: "an administrator (break-glass, recorded as themselves)",
        owner: Some("alice"),
        owner_uid: None,
        users: &[],
        groups: &[],
        user: "root",
        user_uid: None,
        user_groups: &["system:masters", "system:authenticated"],
        grant: Some(Grant::Admin),
    },
    DecisionCase {
        what: "an administrator who is also shared with: the share",
        owner: Some("alice"),
        owner_uid: None,
        users: &["root"],
        groups: &[],
        user: "root",
        user_uid: None,
        user_groups: &["system:masters", "system:authenticated"],
        grant: Some(Grant::SharedUser),
    },
    DecisionCase {
        what: "a group named like an administrators' one is not it",
        owner: Some("alice"),
        owner_uid: None,
        users: &[],
        groups: &[],
        user: "bob",
        user_uid: None,
        user_groups: &["system:master", "system:authenticated"],
        grant: None,
    },
];

/// The shells of one namespace by name, as the index keeps them.
pub type Shells = BTreeMap<String, std::sync::Arc<ShellAccess>>;

/// The shells `pod` belongs to by its name (usually one; two only if one shell's name cut to
/// 58 characters equals another's). Every one of them must let a user in.
pub fn shells_of_pod<'s>(shells: &'s Shells, pod: &str) -> Vec<&'s std::sync::Arc<ShellAccess>> {
    let mut found = Vec::new();
    // A shell name of up to 57 characters is followed by the dash at its end in the pod name.
    for (i, _) in pod.char_indices().filter(|&(i, c)| c == '-' && i > 0 && i < MAX_GENERATED_BASE) {
        if let Some(shell) = shells.get(&pod[..i])
            && is_pod_of(&shell.name, pod)
        {
            found.push(shell);
        }
    }
    // A longer one shows only its first 58 characters.
    if pod.len() == CUT_NAME_LEN {
        let head = &pod[..MAX_GENERATED_BASE];
        let longer = shells.range::<str, _>((std::ops::Bound::Included(head), std::ops::Bound::Unbounded));
        for (name, shell) in longer.take_while(|(name, _)| name.starts_with(head)) {
            if name.len() >= MAX_GENERATED_BASE && is_pod_of(name, pod) {
                found.push(shell);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::Arc;

    use super::*;

    fn user<'a>(name: &'a str, uid: Option<&'a str>, groups: &[&'a str]) -> UserInfo<'a> {
        UserInfo {
            username: Cow::Borrowed(name),
            uid: uid.map(Cow::Borrowed),
            groups: groups.iter().map(|g| Cow::Borrowed(*g)).collect(),
        }
    }

    fn shell(owner: Option<&str>, uid: Option<&str>, users: &[&str], groups: &[&str]) -> ShellAccess {
        ShellAccess {
            classed: None,
            name: "web".into(),
            uid: None,
            owner: owner.map(Into::into),
            owner_uid: uid.map(Into::into),
            users: users.iter().map(|u| (*u).to_owned()).collect(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    #[test]
    fn who_may_connect() {
        for case in DECISION_TABLE {
            let shell = shell(case.owner, case.owner_uid, case.users, case.groups);
            let user = user(case.user, case.user_uid, case.user_groups);
            assert_eq!(may_connect(&shell, &user, DEFAULT_ADMIN_GROUPS), case.grant, "{}", case.what);
        }
    }

    #[test]
    fn who_may_change_the_spec() {
        let admins = vec!["platform-admins".to_owned()];
        let cases = [
            ("no owner: anyone", None, None, user("bob", None, &[]), true),
            ("the owner", Some("alice"), None, user("alice", None, &[]), true),
            ("someone else", Some("alice"), None, user("bob", None, &[]), false),
            ("a shared user is not an owner", Some("alice"), None, user("bob", None, &["devs"]), false),
            ("an administrator", Some("alice"), None, user("root", None, &["platform-admins"]), true),
            ("the owner's name, another uid", Some("alice"), Some("u1"), user("alice", Some("u2"), &[]), false),
        ];
        for (what, owner, uid, user, want) in cases {
            assert_eq!(may_change_spec(owner, uid, &user, &admins), want, "{what}");
        }
    }

    #[test]
    fn the_name_rule_has_one_source() {
        let read = |path: &str| {
            let full = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/").to_owned() + path;
            std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
        };
        let webhook = read("webhook/webhook_configurations.yaml");
        let names = read("policy/shell_names.yaml");
        let replica_set = format!("matches('^{HASH_CLASS}{{1,{MAX_HASH_LEN}}}$')");
        assert!(names.contains(&replica_set), "shell_names.yaml does not say {replica_set}");
        let condition = format!("part.matches('{}') || size(part) == {CUT_NAME_LEN}", deployment_pod_pattern());
        assert!(webhook.contains(&condition), "the webhook's configuration does not say {condition}");
        // The classes as the matcher reads them.
        let chars = |table: &[bool; 256]| (0..=255u8).filter(|&b| table[usize::from(b)]).collect::<Vec<u8>>();
        assert_eq!(chars(&HASH_CHARS), b"456789bcdf");
        assert_eq!(chars(&SUFFIX_CHARS), b"2456789bcdfghjklmnpqrstvwxz");
    }

    #[test]
    fn a_proxy_name_with_a_port_or_scheme_is_the_same_pod() {
        for form in PROXY_NAME_FORMS {
            let name = form.replace("{pod}", "web-7d9f8c6b4-x2x4z");
            assert_eq!(connected_pod(&name), "web-7d9f8c6b4-x2x4z", "{form}");
        }
        // Four parts is no request the proxy serves: nothing is taken out of it.
        assert_eq!(connected_pod("a:b:c:d"), "a:b:c:d");
        assert_eq!(connected_pod(""), "");
    }

    #[test]
    fn pods_of_a_shell_by_name() {
        let long = "l".repeat(70);
        let cut = format!("{}b2c4d", &long[..58]);
        let fifty = "f".repeat(50);
        let cases: Vec<(&str, String, bool)> = vec![
            ("web", "web-7d9f8c6b4-x2x4z".into(), true),
            ("web", "web-4-bbbbb".into(), true),
            ("web", "web-456789bcdf-bbbbb".into(), true),
            ("web", "web-456789bcdf4-bbbbb".into(), false), // an 11-character hash
            ("web", "web-7d9f8c6b4-x2x4".into(), false),    // a 4-character suffix
            ("web", "web-7d9f8c6b4-x2x4a".into(), false),   // `a` is never generated
            ("web", "web-7a9f8c6b4-x2x4z".into(), false),   // nor in a hash
            ("web", "web-b2c4d".into(), false),             // a Job's pod
            ("web", "web-0".into(), false),                 // a StatefulSet's
            ("web", "web-db-7d9f8c6b4-x2x4z".into(), false), // shell web-db's
            ("web-db", "web-db-7d9f8c6b4-x2x4z".into(), true),
            ("web", "webx-7d9f8c6b4-x2x4z".into(), false),
            (long.as_str(), cut.clone(), true),
            (long.as_str(), format!("{}b2c4", &long[..58]), false),
            // 50 characters: `NAME-` fits whole; a long hash is cut after 7 of its characters.
            (fifty.as_str(), format!("{fifty}-7d9f8c6b2c4d"), true), // 63 long: cut
            (fifty.as_str(), format!("{fifty}-7d9f8cb2c4d"), false), // 62, no dash: neither
            (fifty.as_str(), format!("{fifty}-7d9f-b2c4d"), true),   // a short hash: not cut
        ];
        for (shell, pod, want) in cases {
            assert_eq!(is_pod_of(shell, &pod), want, "{shell} / {pod}");
        }
    }

    #[test]
    fn the_shells_a_pod_belongs_to() {
        let access = |name: &str| Arc::new(ShellAccess { name: name.to_owned(), ..ShellAccess::default() });
        let long = "l".repeat(70);
        let twin = format!("{}x", &long[..69]);
        let shells: Shells = ["web", "web-db", "we", long.as_str(), twin.as_str()]
            .into_iter()
            .map(|n| (n.to_owned(), access(n)))
            .collect();
        let names = |pod: &str| shells_of_pod(&shells, pod).iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        assert_eq!(names("web-7d9f8c6b4-x2x4z"), ["web"]);
        assert_eq!(names("web-db-7d9f8c6b4-x2x4z"), ["web-db"]);
        assert!(names("api-7d9f8c6b4-x2x4z").is_empty(), "not a shell's");
        assert!(names("web-0").is_empty());
        let cut = format!("{}b2c4d", &long[..58]);
        assert_eq!(names(&cut), [long.clone(), twin.clone()], "both long names share the first 58 characters");
    }
}
