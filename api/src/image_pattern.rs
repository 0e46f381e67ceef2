//! Image patterns of a class (`spec.images.allowed`): an exact reference, or `*` standing for
//! any run of characters (`registry.example.com/tools/*`, `busybox:1.37*`). Shared by the
//! webhook (a spec's image) and the controller (whether a running shell still fits its class).
//!
//! Hand-written rather than a glob crate: only `*` is meant (a `?` or `[` is a literal
//! character of no image reference anyway, and a glob crate would read them as wildcards), and
//! the class rules need to say which patterns match everything, which a crate does not tell.

/// Whether `image` matches `pattern`.
pub fn matches(pattern: &str, image: &str) -> bool {
    let mut parts = pattern.split('*');
    // split always yields at least one part.
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = image.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Whether `pattern` matches every image (only stars).
pub fn matches_everything(pattern: &str) -> bool {
    !pattern.is_empty() && pattern.chars().all(|c| c == '*')
}

/// Whether any of `patterns` matches `image`.
pub fn any_matches(patterns: &[String], image: &str) -> bool {
    patterns.iter().any(|p| matches(p, image))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        // (pattern, image, matches)
        let cases: &[(&str, &str, bool)] = &[
            ("busybox:1.37.0", "busybox:1.37.0", true),
            ("busybox:1.37.0", "busybox:1.37.01", false),
            ("busybox:1.37.0", "xbusybox:1.37.0", false),
            ("registry.example.com/tools/*", "registry.example.com/tools/shell:1", true),
            ("registry.example.com/tools/*", "registry.example.com/tools/", true),
            ("registry.example.com/tools/*", "registry.example.com/toolsx/shell:1", false),
            ("registry.example.com/tools/*", "evil.com/registry.example.com/tools/x", false),
            ("*/shell:1", "a.io/shell:1", true),
            ("*/shell:1", "a.io/shell:12", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "a-b-b-c", true),
            ("a*b*c", "acb", false),
            ("ab*ba", "aba", false),
            ("*", "anything@sha256:00", true),
            ("**", "x", true),
            ("", "", true),
            ("", "x", false),
        ];
        for (pattern, image, want) in cases {
            assert_eq!(matches(pattern, image), *want, "{pattern:?} vs {image:?}");
        }
    }

    #[test]
    fn only_stars_match_everything() {
        for (pattern, want) in [("*", true), ("***", true), ("", false), ("*/*", false), ("a*", false)] {
            assert_eq!(matches_everything(pattern), want, "{pattern:?}");
        }
    }
}
