//! Container resource names as kube-apiserver validates them (k8s.io/kubernetes
//! pkg/apis/core/validation `validateContainerResourceName`, and the name helpers of
//! pkg/apis/core/helper): which names a container may use, and which rules their quantities
//! follow.

/// `hugepages-<page size>`, e.g. `hugepages-2Mi`.
const HUGEPAGES_PREFIX: &str = "hugepages-";
/// The domain of the apiserver's own resource names.
const DEFAULT_NAMESPACE: &str = "kubernetes.io/";
/// Quota names are `requests.<resource>`; an extended resource must not look like one.
const QUOTA_REQUESTS_PREFIX: &str = "requests.";
const DNS_SUBDOMAIN_MAX: usize = 253;
const NAME_PART_MAX: usize = 63;

/// Why `name` cannot name a container's resource, if it cannot.
pub fn check(name: &str) -> Result<(), String> {
    if !is_qualified_name(name) {
        return Err(format!(
            "must be a qualified name: an optional DNS subdomain prefix (lowercase) and '/', then a name of at most \
             {NAME_PART_MAX} characters (letters, digits, '-', '_' or '.', starting and ending with a letter or digit), \
             got {name:?}"
        ));
    }
    if !name.contains('/') {
        return match name {
            "cpu" | "memory" | "ephemeral-storage" => Ok(()),
            _ if is_hugepages(name) => Ok(()),
            _ => Err(format!(
                "must be cpu, memory, ephemeral-storage, hugepages-<size> or an extended resource name such as \
                 example.com/gpu, got {name:?}"
            )),
        };
    }
    if is_native(name) {
        return Ok(());
    }
    if name.starts_with(QUOTA_REQUESTS_PREFIX) {
        return Err(format!("an extended resource name must not start with {QUOTA_REQUESTS_PREFIX:?}, got {name:?}"));
    }
    // The apiserver also checks the quota name `requests.<name>`, whose domain must still fit.
    if !is_qualified_name(&format!("{QUOTA_REQUESTS_PREFIX}{name}")) {
        let max = DNS_SUBDOMAIN_MAX - QUOTA_REQUESTS_PREFIX.len();
        return Err(format!("the domain of an extended resource name must be at most {max} characters, got {name:?}"));
    }
    Ok(())
}

/// `hugepages-<page size>`: the page size text, for a hugepages name.
pub fn page_size(name: &str) -> Option<&str> {
    name.strip_prefix(HUGEPAGES_PREFIX)
}

pub fn is_hugepages(name: &str) -> bool {
    name.starts_with(HUGEPAGES_PREFIX)
}

/// One of the apiserver's own names: unqualified, or in a `kubernetes.io/` domain.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains(DEFAULT_NAMESPACE)
}

/// An extended resource (`example.com/gpu`, for a name [`check`] accepts): counted in whole
/// units, and never overcommitted.
pub fn is_extended(name: &str) -> bool {
    !is_native(name)
}

/// Whether a request may be below its limit: not for extended resources or hugepages, whose
/// request must equal the limit.
pub fn may_overcommit(name: &str) -> bool {
    is_native(name) && !is_hugepages(name)
}

/// A label key: `[prefix/]name` (apimachinery's `IsQualifiedName`).
fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    let name_ok = (1..=NAME_PART_MAX).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    name_ok && prefix.is_none_or(is_dns_subdomain)
}

/// A lowercase RFC 1123 subdomain: dot-separated labels of `[a-z0-9-]` that start and end with
/// `[a-z0-9]`, at most 253 characters in all.
fn is_dns_subdomain(value: &str) -> bool {
    value.len() <= DNS_SUBDOMAIN_MAX
        && value.split('.').all(|label| {
            let b = label.as_bytes();
            let edge = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
            edge(b.first())
                && edge(b.last())
                && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_the_apiserver_takes_them() {
        let valid = [
            "cpu",
            "memory",
            "ephemeral-storage",
            "hugepages-2Mi",
            "hugepages-1Gi",
            "example.com/gpu",
            "nvidia.com/gpu",
            "a.b-c.example.com/x_y.z",
            "kubernetes.io/custom",
            "example.kubernetes.io/anything",
            "1.example/2",
        ];
        for name in valid {
            assert_eq!(check(name), Ok(()), "{name}");
        }
        let invalid = [
            ("cpus", "must be cpu, memory"),
            ("pods", "must be cpu, memory"),
            ("requests.cpu", "must be cpu, memory"),
            ("storage", "must be cpu, memory"),
            ("", "qualified name"),
            ("/gpu", "qualified name"),
            ("example.com/", "qualified name"),
            ("a/b/c", "qualified name"),
            ("Example.com/gpu", "qualified name"),
            ("example..com/gpu", "qualified name"),
            ("-example.com/gpu", "qualified name"),
            ("example.com/-gpu", "qualified name"),
            ("example.com/gpu-", "qualified name"),
            ("example.com/g pu", "qualified name"),
            ("cpu ", "qualified name"),
            ("requests.example.com/gpu", "must not start with \"requests.\""),
        ];
        for (name, want) in invalid {
            let err = check(name).err().unwrap_or_else(|| panic!("{name:?} accepted"));
            assert!(err.contains(want), "{name:?}: {err}");
        }
        let long_name = format!("example.com/{}", "n".repeat(64));
        assert!(check(&long_name).is_err());
        assert!(check(&format!("example.com/{}", "n".repeat(63))).is_ok());
        // The domain may be 253 characters as a name, 244 as an extended resource's.
        let domain = |len: usize| format!("{}.com", "a".repeat(len - 4));
        assert!(check(&format!("{}/gpu", domain(244))).is_ok());
        assert!(check(&format!("{}/gpu", domain(245))).is_err_and(|e| e.contains("at most 244")));
    }

    #[test]
    fn which_rules_a_name_brings() {
        // (name, extended, may overcommit, page size)
        let cases = [
            ("cpu", false, true, None),
            ("hugepages-2Mi", false, false, Some("2Mi")),
            ("example.com/gpu", true, false, None),
            ("kubernetes.io/custom", false, true, None),
        ];
        for (name, extended, overcommit, page) in cases {
            assert_eq!(
                (is_extended(name), may_overcommit(name), page_size(name)),
                (extended, overcommit, page),
                "{name}"
            );
        }
    }
}
