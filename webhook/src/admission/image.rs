//! Container image references, as the OCI distribution spec (and `docker pull`) reads them:
//! `[host[:port]/]path[:tag][@sha256:<64 hex>]`.

/// The registry an image without an explicit host comes from.
pub const DEFAULT_REGISTRY: &str = "docker.io";
const MAX_NAME_LEN: usize = 255;
const MAX_TAG_LEN: usize = 128;

/// A parsed reference, borrowing from the text it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRef<'a> {
    /// Registry host (with port) if the reference names one.
    pub host: Option<&'a str>,
    /// Repository path within the registry, e.g. `library/busybox` or `tools/shell`.
    pub path: &'a str,
    /// The tag, e.g. `1.37.0`.
    pub tag: Option<&'a str>,
    /// `sha256:<hex>`.
    pub digest: Option<&'a str>,
}

impl<'a> ImageRef<'a> {
    /// The registry the image is pulled from (`docker.io` when none is named).
    pub fn registry(&self) -> &str {
        self.host.unwrap_or(DEFAULT_REGISTRY)
    }

    /// `registry/path`, the repository as a whole (for allow-list prefixes).
    pub fn repository(&self) -> String {
        format!("{}/{}", self.registry(), self.path)
    }

    /// The repository's full name as the kubelet reads it: `busybox` is
    /// `docker.io/library/busybox`, `me/tools` is `docker.io/me/tools`. Its length is what the
    /// 255-character limit applies to (a name that fits only as written fails as
    /// `InvalidImageName` on the node).
    pub fn normalized_name(&self) -> String {
        self.normalized_parts().concat()
    }

    /// [`ImageRef::normalized_name`] in three parts, whose lengths tell its length without
    /// writing it (every validation reads the length; only a refusal shows the name).
    fn normalized_parts(&self) -> [&'a str; 3] {
        match self.host {
            Some(host) if host != DEFAULT_REGISTRY || self.path.contains('/') => [host, "/", self.path],
            _ if !self.path.contains('/') => [DEFAULT_REGISTRY, "/library/", self.path],
            _ => [DEFAULT_REGISTRY, "/", self.path],
        }
    }

    /// Pinned to a digest, or to a tag other than `latest`.
    pub fn is_pinned(&self) -> bool {
        self.digest.is_some() || self.tag.is_some_and(|t| t != "latest")
    }

    /// Whether the image comes from one of `allowed`: each entry is a registry (`ghcr.io`,
    /// `registry.example.com:5000`), a repository prefix (`ghcr.io/my-org`) or a whole
    /// repository (`ghcr.io/my-org/shell`), matched at `/` boundaries.
    pub fn allowed_by(&self, allowed: &[String]) -> bool {
        let repository = self.repository();
        allowed.iter().map(|a| a.trim_end_matches('/')).any(|a| {
            a == self.registry()
                || repository.strip_prefix(a).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }
}

/// The first position of `byte` in `text`. Image references are short: a plain loop beats the
/// general string searcher's setup.
fn byte_position(text: &str, byte: u8) -> Option<usize> {
    text.bytes().position(|b| b == byte)
}

fn is_alnum_lower(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `alpha-numeric (separator alpha-numeric)*` with separators `.`, `_`, `__`, `-+`.
fn valid_path_component(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() || !is_alnum_lower(b[0]) || !is_alnum_lower(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_alnum_lower(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !is_alnum_lower(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// A TCP port a registry can listen on: 1-65535 (0 is no port at all).
fn check_port(port: &str) -> Result<(), String> {
    let number = port.bytes().all(|b| b.is_ascii_digit()).then(|| port.parse::<u16>().ok()).flatten();
    match number {
        Some(1..) => Ok(()),
        _ => Err(format!("registry port must be 1-65535, got {port:?}")),
    }
}

/// A registry host: a DNS name or `[IPv6]`, with an optional port.
fn check_host(host: &str) -> Result<(), String> {
    let invalid = || format!("invalid registry host {host:?}");
    if let Some(rest) = host.strip_prefix('[') {
        let Some((v6, tail)) = rest.split_once(']') else { return Err(invalid()) };
        if v6.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(invalid());
        }
        if tail.is_empty() {
            return Ok(());
        }
        return tail.strip_prefix(':').map_or_else(|| Err(invalid()), check_port);
    }
    let (name, port) = match byte_position(host, b':') {
        Some(i) => (&host[..i], Some(&host[i + 1..])),
        None => (host, None),
    };
    let valid_name = !name.is_empty()
        && name.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|x| x.is_ascii_alphanumeric() || *x == b'-')
        });
    if !valid_name {
        return Err(invalid());
    }
    port.map_or(Ok(()), check_port)
}

/// Whitespace or a control character in the reference, named (a NUL or an escape sequence
/// is not "whitespace" to the person reading the denial).
fn check_characters(reference: &str) -> Result<(), String> {
    if reference.chars().any(char::is_whitespace) {
        return Err("contains whitespace".into());
    }
    match reference.chars().find(|c| c.is_control()) {
        Some(c) => Err(format!("contains a control character (U+{:04X})", u32::from(c))),
        None => Ok(()),
    }
}

/// Parse `reference`; the error says which part is wrong.
pub fn parse(reference: &str) -> Result<ImageRef<'_>, String> {
    if reference.is_empty() {
        return Err("empty".into());
    }
    check_characters(reference)?;
    let (rest, digest) = match byte_position(reference, b'@') {
        Some(i) => {
            let (rest, digest) = (&reference[..i], &reference[i + 1..]);
            let hex = digest.strip_prefix("sha256:").ok_or("digest must start with sha256:")?;
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                return Err("sha256 digest must be 64 lowercase hex digits".into());
            }
            (rest, Some(digest))
        }
        None => (reference, None),
    };
    // A ':' after the last '/' starts the tag (a ':' before it is the registry's port).
    let last_slash = rest.bytes().rposition(|b| b == b'/').map_or(0, |i| i + 1);
    let (name, tag) = match byte_position(&rest[last_slash..], b':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(tag) = tag {
        let b = tag.as_bytes();
        let ok = !b.is_empty()
            && b.len() <= MAX_TAG_LEN
            && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
            && b.iter().all(|x| x.is_ascii_alphanumeric() || matches!(x, b'_' | b'.' | b'-'));
        if !ok {
            return Err(format!("invalid tag {tag:?}"));
        }
    }
    if name.is_empty() {
        return Err("no repository name".into());
    }
    let first_slash = byte_position(name, b'/');
    let (host, path) = match first_slash.map(|i| (&name[..i], &name[i + 1..])) {
        Some((first, rest))
            if first.bytes().any(|b| b == b'.' || b == b':') || first == "localhost" || first.starts_with('[') =>
        {
            check_host(first)?;
            (Some(first), rest)
        }
        _ => (None, name),
    };
    if path.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err("repository path must be lowercase".into());
    }
    if let Some(bad) = path.split('/').find(|c| !valid_path_component(c)) {
        return Err(format!("invalid path component {bad:?}"));
    }
    let parsed = ImageRef { host, path, tag, digest };
    if parsed.normalized_parts().iter().map(|part| part.len()).sum::<usize>() > MAX_NAME_LEN {
        let full = parsed.normalized_name();
        return Err(format!(
            "the repository name is {} characters as the kubelet reads it ({}…), at most {MAX_NAME_LEN}",
            full.len(),
            &full[..full.len().min(40)]
        ));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn valid_references() {
        // (input, host, path, tag, has digest)
        type Case<'a> = (&'a str, Option<&'a str>, &'a str, Option<&'a str>, bool);
        let cases: &[Case] = &[
            ("busybox", None, "busybox", None, false),
            ("busybox:1.37.0", None, "busybox", Some("1.37.0"), false),
            ("library/busybox:latest", None, "library/busybox", Some("latest"), false),
            ("ghcr.io/org/tools/shell:v1", Some("ghcr.io"), "org/tools/shell", Some("v1"), false),
            ("localhost:5000/shell", Some("localhost:5000"), "shell", None, false),
            ("localhost/shell:dev", Some("localhost"), "shell", Some("dev"), false),
            (
                "registry.example.com:443/a_b/c__d/e-f--g.h:TAG_1.2-x",
                Some("registry.example.com:443"),
                "a_b/c__d/e-f--g.h",
                Some("TAG_1.2-x"),
                false,
            ),
            ("[::1]:5000/shell:1", Some("[::1]:5000"), "shell", Some("1"), false),
            ("reg.io:1/shell:1", Some("reg.io:1"), "shell", Some("1"), false),
            ("reg.io:65535/shell:1", Some("reg.io:65535"), "shell", Some("1"), false),
        ];
        for (input, host, path, tag, digest) in cases {
            let r = parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!((r.host, r.path, r.tag, r.digest.is_some()), (*host, *path, *tag, *digest), "{input}");
        }
        let pinned_text = format!("ghcr.io/org/shell@{DIGEST}");
        let pinned = parse(&pinned_text).unwrap();
        assert_eq!(pinned.digest, Some(DIGEST));
        assert!(pinned.is_pinned());
        let both_text = format!("shell:1.0@{DIGEST}");
        let both = parse(&both_text).unwrap();
        assert_eq!((both.tag, both.digest.is_some()), (Some("1.0"), true));
    }

    #[test]
    fn invalid_references_say_why() {
        let cases = [
            ("", "empty"),
            ("Busybox", "lowercase"),
            ("busy box", "whitespace"),
            ("busybox:", "invalid tag"),
            ("busybox:-x", "invalid tag"),
            ("busybox:a:b", "invalid tag"),
            ("busybox@sha256:abc", "64 lowercase hex"),
            ("busybox@md5:0123", "sha256:"),
            ("ghcr.io/", "invalid path component"),
            ("ghcr.io//x", "invalid path component"),
            ("bad_host.io:99999/x", "invalid registry host"),
            ("-leading", "invalid path component"),
            ("a..b", "invalid path component"),
            (":tag", "no repository name"),
            ("reg.io:0/shell:1", "registry port must be 1-65535, got \"0\""),
            ("[::1]:0/shell:1", "registry port must be 1-65535, got \"0\""),
            ("reg.io:65536/shell:1", "registry port must be 1-65535, got \"65536\""),
            ("reg.io:/shell:1", "registry port must be 1-65535, got \"\""),
            ("busybox:1\u{0}", "contains a control character (U+0000)"),
            ("busy\u{7f}box", "contains a control character (U+007F)"),
            ("busybox\u{85}", "contains whitespace"),
            ("busybox:1\u{9b}", "contains a control character (U+009B)"),
            ("busy\tbox", "contains whitespace"),
            ("busybox\u{a0}", "contains whitespace"),
        ];
        for (input, want) in cases {
            let err = parse(input).err().unwrap_or_else(|| panic!("{input:?} was accepted"));
            assert!(err.contains(want), "{input:?}: {err}");
        }
        let long = format!("{}:1", "a".repeat(300));
        assert!(parse(&long).is_err());
    }

    #[test]
    fn the_name_limit_counts_what_the_kubelet_adds() {
        // `docker.io/library/` is 18 characters: a bare name fits up to 237.
        let cases = [
            ("a".repeat(237), true),
            ("a".repeat(238), false),
            ("a".repeat(255), false),
            (format!("me/{}", "a".repeat(242)), true),
            (format!("me/{}", "a".repeat(243)), false),
            (format!("ghcr.io/{}", "a".repeat(247)), true),
            (format!("ghcr.io/{}", "a".repeat(248)), false),
        ];
        for (name, fits) in cases {
            let result = parse(&name);
            assert_eq!(result.is_ok(), fits, "{} characters: {result:?}", name.len());
            if let Err(e) = result {
                assert!(e.contains("as the kubelet reads it") && e.contains("at most 255"), "{e}");
            }
        }
        assert_eq!(parse("busybox").unwrap().normalized_name(), "docker.io/library/busybox");
        assert_eq!(parse("docker.io/busybox").unwrap().normalized_name(), "docker.io/library/busybox");
        assert_eq!(parse("me/tools").unwrap().normalized_name(), "docker.io/me/tools");
    }

    #[test]
    fn registries_pinning_and_allow_lists() {
        let hub = parse("busybox").unwrap();
        assert_eq!(hub.registry(), "docker.io");
        assert!(!hub.is_pinned());
        assert!(!parse("busybox:latest").unwrap().is_pinned());
        assert!(parse("busybox:1.37.0").unwrap().is_pinned());
        let allowed: Vec<String> = vec!["docker.io".into(), "ghcr.io/my-org".into()];
        assert!(hub.allowed_by(&allowed));
        assert!(parse("ghcr.io/my-org/shell:1").unwrap().allowed_by(&allowed));
        assert!(!parse("ghcr.io/my-org-evil/shell:1").unwrap().allowed_by(&allowed));
        assert!(!parse("quay.io/x/shell:1").unwrap().allowed_by(&allowed));
        // A whole repository allows itself, and nothing that merely starts with its name.
        let exact: Vec<String> = vec!["ghcr.io/my-org/shell".into()];
        assert!(parse("ghcr.io/my-org/shell:1").unwrap().allowed_by(&exact));
        assert!(!parse("ghcr.io/my-org/shell-evil:1").unwrap().allowed_by(&exact));
        assert!(!parse("ghcr.io/my-org/other:1").unwrap().allowed_by(&exact));
    }
}
