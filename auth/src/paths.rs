//! `--allow-paths` / `--ignore-paths` patterns: an exact path, or a prefix ending in `*`.
//! Immutable once parsed, so matching needs no lock and no shared state.

use std::fmt;
use std::str::FromStr;

/// Why a pattern is refused; each holds the pattern as given (trimmed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathPatternError {
    /// Request paths always start with `/`, so this could never match.
    #[error("path pattern {0:?}: must start with '/'")]
    NotAbsolute(String),
    /// A `*` before the end: only a trailing wildcard (a prefix) is supported.
    #[error("path pattern {0:?}: '*' is only allowed as the last character")]
    InnerWildcard(String),
}

/// One pattern: `/metrics` matches only `/metrics`; `/debug/*` matches every path starting
/// with `/debug/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathPattern {
    /// Matches this path only.
    Exact(String),
    /// Matches every path that starts with this (the pattern without its `*`).
    Prefix(String),
}

impl FromStr for PathPattern {
    type Err = PathPatternError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if !s.starts_with('/') {
            return Err(PathPatternError::NotAbsolute(s.to_owned()));
        }
        match s.strip_suffix('*') {
            Some(prefix) if prefix.contains('*') => Err(PathPatternError::InnerWildcard(s.to_owned())),
            Some(prefix) => Ok(Self::Prefix(prefix.to_owned())),
            None if s.contains('*') => Err(PathPatternError::InnerWildcard(s.to_owned())),
            None => Ok(Self::Exact(s.to_owned())),
        }
    }
}

impl fmt::Display for PathPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exact(p) => f.write_str(p),
            Self::Prefix(p) => write!(f, "{p}*"),
        }
    }
}

impl PathPattern {
    /// Whether `path` (a request's, without the query) matches, compared byte for byte: no
    /// normalization, so `/metrics/` is not `/metrics`.
    pub fn matches(&self, path: &str) -> bool {
        match self {
            Self::Exact(p) => path == p,
            Self::Prefix(p) => path.starts_with(p.as_str()),
        }
    }
}

/// A list of patterns; matches when any pattern does. Empty matches nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathPatterns(Vec<PathPattern>);

impl PathPatterns {
    /// Parse a comma-separated list (empty items are ignored, as with kube-rbac-proxy).
    pub fn parse_list(list: &[String]) -> Result<Self, PathPatternError> {
        list.iter()
            .flat_map(|item| item.split(','))
            .filter(|p| !p.trim().is_empty())
            .map(str::parse)
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// No patterns: an empty `--allow-paths` restricts nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether any pattern matches `path` (see [`PathPattern::matches`]).
    pub fn matches(&self, path: &str) -> bool {
        self.0.iter().any(|p| p.matches(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_exactly_or_by_trailing_star() {
        let cases = [
            ("/metrics", "/metrics", true),
            ("/metrics", "/metrics/", false),
            ("/metrics", "/metricsx", false),
            ("/metrics", "/", false),
            ("/debug/*", "/debug/", true),
            ("/debug/*", "/debug/pprof/heap", true),
            ("/debug/*", "/debug", false),
            ("/*", "/anything/at/all", true),
            ("/api*", "/apis", true),
        ];
        for (pattern, path, want) in cases {
            let p: PathPattern = pattern.parse().unwrap();
            assert_eq!(p.matches(path), want, "{pattern} vs {path}");
            assert_eq!(p.to_string(), pattern);
        }
    }

    #[test]
    fn bad_patterns_name_the_rule() {
        let cases = [
            ("metrics", "must start with '/'"),
            ("", "must start with '/'"),
            ("/a/*/b", "only allowed as the last character"),
            ("/a**", "only allowed as the last character"),
            ("/*/x*", "only allowed as the last character"),
        ];
        for (pattern, want) in cases {
            let err = pattern.parse::<PathPattern>().unwrap_err().to_string();
            assert!(err.contains(want) && err.contains(pattern), "{pattern}: {err}");
        }
    }

    #[test]
    fn lists_split_on_commas_and_match_any() {
        let list = PathPatterns::parse_list(&["/metrics, /healthz".into(), "/debug/*".into(), String::new()]).unwrap();
        for (path, want) in [("/metrics", true), ("/healthz", true), ("/debug/x", true), ("/other", false)] {
            assert_eq!(list.matches(path), want, "{path}");
        }
        assert!(PathPatterns::parse_list(&[]).unwrap().is_empty());
        assert!(!PathPatterns::default().matches("/metrics"));
        assert!(PathPatterns::parse_list(&["/ok,bad".into()]).is_err());
    }
}
