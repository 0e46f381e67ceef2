//! Prometheus and promtool from Debian's `prometheus` package, and the alert rules checked with
//! them (`check_rules`, part of `cargo xtask test`).
//!
//! The binaries come from the package archive, unpacked with `dpkg -x` into
//! `~/.cache/myownshell/prometheus/<package version>/`: installing the package would run its
//! maintainer scripts, which start a Prometheus daemon on `:9090` (and pull in the node
//! exporter, which starts another). Debian's build has no Kubernetes service discovery, which
//! the tests do not need: they write `file_sd` targets themselves.
//!
//! Only upstream [`UPSTREAM`] is accepted (any Debian revision of it): `promtool test rules`
//! compares floats to the last bit and templated annotations as text, so the unit tests in
//! [`RULE_TESTS`] are written against one promtool.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use myownshell_envtest::assets;
use myownshell_envtest::node::assets::is_root;
use serde_json::{Value, json};

use crate::progress::Step;

/// The directory holding `prometheus` and `promtool`, when set: used as it is, nothing cached.
pub const ENV: &str = "MYOWNSHELL_PROMETHEUS";
/// The upstream release the rule unit tests are written against (Debian bookworm's).
const UPSTREAM: &str = "2.42.0";
const PACKAGE: &str = "prometheus";
const BINARIES: [&str; 2] = ["prometheus", "promtool"];
/// Written once both binaries are in place and run; its absence means "unpack".
const STAMP: &str = ".complete";
/// The kustomize tree whose PrometheusRule holds the alerts.
const RULE_TREE: &str = "prometheus";
/// `promtool test rules` unit tests of every alert; they load [`RULES_FILE`] from their own
/// directory, so both are written side by side under `target/prometheus/`.
const RULE_TESTS: &str = "tests/prometheus/rules-test.yaml";
/// The PrometheusRule's `.spec`, extracted (JSON is YAML to promtool). Never committed: the
/// PrometheusRule is the one copy.
const RULES_FILE: &str = "myownshell-rules.json";
/// The dashboard whose queries must parse.
const DASHBOARD: &str = "config/grafana/myownshell.json";
/// Where every alert's `runbook_url` points, followed by `#<section anchor>`.
const RUNBOOK_URL: &str = "https://github.com/myownshell/myownshell/blob/main/docs/runbooks.md";
const RUNBOOKS: &str = "docs/runbooks.md";
const SEVERITIES: [&str; 2] = ["critical", "warning"];

fn cache_dir() -> PathBuf {
    assets::cache_root().join("prometheus")
}

/// A directory with Debian's `prometheus` and `promtool` of release [`UPSTREAM`]: `$ENV` if set,
/// else the cache, unpacked there from the package archive on first use (`apt-get download`;
/// no install, no daemon).
pub fn ensure() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(ENV).filter(|v| !v.is_empty()).map(PathBuf::from) {
        verify(&dir).with_context(|| format!("{ENV}={}", dir.display()))?;
        return Ok(dir);
    }
    if let Some(dir) = cached() {
        return Ok(dir);
    }
    let version = candidate()?;
    unpack(&version)
}

/// The newest complete cache entry of [`UPSTREAM`], if any: no apt at all once it is there.
fn cached() -> Option<PathBuf> {
    let entries = std::fs::read_dir(cache_dir()).ok()?;
    let mut complete: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|dir| {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            name.starts_with(&format!("{UPSTREAM}+")) && dir.join(STAMP).is_file() && verify(dir).is_ok()
        })
        .collect();
    complete.sort();
    complete.pop()
}

/// Both binaries are there and promtool says it is [`UPSTREAM`].
fn verify(dir: &Path) -> anyhow::Result<()> {
    for binary in BINARIES {
        if !assets::is_executable(&dir.join(binary)) {
            bail!("{} is missing or not executable", dir.join(binary).display());
        }
    }
    let out = Command::new(dir.join("promtool")).arg("--version").output().context("running promtool --version")?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !text.contains(&format!("version {UPSTREAM}")) {
        bail!("promtool is not {UPSTREAM} (the rule unit tests are written against it): {}", text.trim());
    }
    Ok(())
}

/// The package version apt would download, which must be a Debian revision of [`UPSTREAM`].
/// Without package lists, and as root, `apt-get update` once first.
fn candidate() -> anyhow::Result<String> {
    let mut version = apt_candidate()?;
    if version.is_none() && is_root() {
        let status = Command::new("apt-get").args(["update", "-q"]).status().context("running apt-get update")?;
        if !status.success() {
            bail!("`apt-get update` failed ({status})");
        }
        version = apt_candidate()?;
    }
    let Some(version) = version else {
        bail!("apt knows no `{PACKAGE}` package: run `apt-get update` (Debian bookworm has {UPSTREAM}), or set {ENV}")
    };
    if !version.starts_with(&format!("{UPSTREAM}+")) {
        bail!(
            "apt offers {PACKAGE} {version}, not {UPSTREAM}: the rule unit tests ({RULE_TESTS}) are written against \
             promtool {UPSTREAM}; update UPSTREAM in xtask/src/prometheus.rs and re-check them, or set {ENV}"
        );
    }
    Ok(version)
}

fn apt_candidate() -> anyhow::Result<Option<String>> {
    let out = Command::new("apt-cache").args(["policy", PACKAGE]).output().context("running apt-cache policy")?;
    Ok(parse_candidate(&String::from_utf8_lossy(&out.stdout)))
}

/// `Candidate: X` of `apt-cache policy` output (`None` for `(none)` or no such line).
fn parse_candidate(policy: &str) -> Option<String> {
    let line = policy.lines().find_map(|l| l.trim().strip_prefix("Candidate:"))?;
    let version = line.trim();
    (!version.is_empty() && version != "(none)").then(|| version.to_owned())
}

/// `apt-get download` and `dpkg -x` into a scratch directory, then the two binaries renamed
/// into `<cache>/<version>/`, checked, and stamped.
fn unpack(version: &str) -> anyhow::Result<PathBuf> {
    let dir = cache_dir().join(version);
    let step = Step::start(format!("unpacking Debian's {PACKAGE} {version} (once; cached in {})", dir.display()));
    let scratch = dir.join(".unpack");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    // apt-get download writes into the working directory; as root it warns that the download is
    // not sandboxed (its `_apt` user cannot write here), which is harmless.
    let status = Command::new("apt-get")
        .args(["download", "-q", &format!("{PACKAGE}={version}")])
        .current_dir(&scratch)
        .status()
        .context("running apt-get download")?;
    if !status.success() {
        bail!("`apt-get download {PACKAGE}={version}` failed ({status})");
    }
    let deb = std::fs::read_dir(&scratch)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .with_context(|| format!("no .deb in {} after apt-get download", scratch.display()))?;
    let root = scratch.join("root");
    let status = Command::new("dpkg").arg("-x").arg(&deb).arg(&root).status().context("running dpkg -x")?;
    if !status.success() {
        bail!("`dpkg -x {}` failed ({status})", deb.display());
    }
    for binary in BINARIES {
        let from = root.join("usr/bin").join(binary);
        std::fs::rename(&from, dir.join(binary)).with_context(|| format!("moving {}", from.display()))?;
    }
    verify(&dir)?;
    std::fs::remove_dir_all(&scratch).with_context(|| format!("removing {}", scratch.display()))?;
    std::fs::write(dir.join(STAMP), format!("{PACKAGE} {version}\n"))?;
    step.done();
    Ok(dir)
}

/// The alert rules as `cargo xtask test` checks them: the PrometheusRule of `config/prometheus`
/// (as kustomize renders it) has a severity, a summary, a description and a runbook section for
/// every alert; `promtool check rules` accepts its `.spec`; `promtool test rules` passes
/// [`RULE_TESTS`] against it; and every dashboard query parses.
pub fn check_rules() -> anyhow::Result<()> {
    let step = Step::start("alert rules: lint, promtool check rules, promtool test rules, dashboard queries");
    let promtool = ensure()?.join("promtool");
    let root = assets::workspace_root();
    let spec = rule_spec()?;
    let runbooks = read(&root.join(RUNBOOKS))?;
    let problems = lint(&spec, &runbooks);
    if !problems.is_empty() {
        bail!("the alerts in config/{RULE_TREE}:\n  {}", problems.join("\n  "));
    }

    let out = assets::target_dir().join("prometheus");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let rules = out.join(RULES_FILE);
    write_json(&rules, &spec)?;
    let tests = out.join("rules-test.yaml");
    std::fs::copy(root.join(RULE_TESTS), &tests).with_context(|| format!("copying {RULE_TESTS}"))?;
    promtool_run(&promtool, &["check", "rules"], &rules)?;
    promtool_run(&promtool, &["test", "rules"], &tests)?;

    let dashboard: Value = serde_json::from_str(&read(&root.join(DASHBOARD))?).context(DASHBOARD)?;
    let queries = out.join("dashboard-queries.json");
    write_json(&queries, &dashboard_rules(&dashboard))?;
    promtool_run(&promtool, &["check", "rules"], &queries).context(DASHBOARD)?;
    step.done();
    Ok(())
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn write_json(path: &Path, value: &Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The `.spec` of the one PrometheusRule in `config/prometheus`: a Prometheus rules file as is.
fn rule_spec() -> anyhow::Result<Value> {
    let objects = myownshell_envtest::kustomize::render(RULE_TREE).map_err(anyhow::Error::msg)?;
    let mut rules = myownshell_envtest::kustomize::of_kind(&objects, "PrometheusRule").into_iter();
    match (rules.next(), rules.next()) {
        (Some(rule), None) => Ok(rule["spec"].clone()),
        _ => bail!("config/{RULE_TREE} must render exactly one PrometheusRule"),
    }
}

/// `promtool <command> <file>`: its output is the error when it fails.
fn promtool_run(promtool: &Path, command: &[&str], file: &Path) -> anyhow::Result<()> {
    let out = Command::new(promtool).args(command).arg(file).output().context("running promtool")?;
    if !out.status.success() {
        bail!(
            "promtool {} {} failed:\n{}{}",
            command.join(" "),
            file.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// What is wrong with the alerts of a rules `spec`, one line each: a severity of
/// [`SEVERITIES`], a summary and a description, and a `runbook_url` into [`RUNBOOK_URL`] whose
/// section exists in `runbooks` (the markdown).
fn lint(spec: &Value, runbooks: &str) -> Vec<String> {
    let sections = anchors(runbooks);
    let mut problems = Vec::new();
    let alerts =
        spec["groups"].as_array().into_iter().flatten().flat_map(|g| g["rules"].as_array().into_iter().flatten());
    let mut count = 0;
    for rule in alerts {
        let Some(name) = rule["alert"].as_str() else { continue };
        count += 1;
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        if !SEVERITIES.contains(&severity) {
            problems.push(format!("{name}: severity {severity:?} is none of {SEVERITIES:?}"));
        }
        for annotation in ["summary", "description"] {
            if rule["annotations"][annotation].as_str().is_none_or(|s| s.trim().is_empty()) {
                problems.push(format!("{name}: no {annotation} annotation"));
            }
        }
        let url = rule["annotations"]["runbook_url"].as_str().unwrap_or_default();
        match url.strip_prefix(RUNBOOK_URL).and_then(|rest| rest.strip_prefix('#')) {
            Some(anchor) if sections.contains(anchor) => {}
            Some(anchor) => problems.push(format!("{name}: {RUNBOOKS} has no section #{anchor}")),
            None => problems.push(format!("{name}: runbook_url {url:?} does not point into {RUNBOOK_URL}#…")),
        }
    }
    if count == 0 {
        problems.push("no alerts at all".to_owned());
    }
    problems
}

/// The anchors GitHub gives the headings of a markdown file: lower case, spaces to `-`,
/// punctuation other than `-` and `_` dropped (headings inside code fences are not headings).
fn anchors(markdown: &str) -> std::collections::BTreeSet<String> {
    let mut in_fence = false;
    let mut out = std::collections::BTreeSet::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let Some(heading) = line.strip_prefix('#') else { continue };
        if in_fence {
            continue;
        }
        let text = heading.trim_start_matches('#').trim();
        let slug: String = text
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        out.insert(slug);
    }
    out
}

/// Every panel query of a Grafana dashboard as a recording rule (`dashboard:query_<panel>_<ref>`),
/// its Grafana variables replaced ([`substitute`]), for `promtool check rules` to parse.
fn dashboard_rules(dashboard: &Value) -> Value {
    let mut rules = Vec::new();
    let mut stack: Vec<&Value> = dashboard["panels"].as_array().into_iter().flatten().collect();
    while let Some(panel) = stack.pop() {
        stack.extend(panel["panels"].as_array().into_iter().flatten());
        for target in panel["targets"].as_array().into_iter().flatten() {
            let Some(expr) = target["expr"].as_str() else { continue };
            let record = format!("dashboard:query_{}_{}", panel["id"], target["refId"].as_str().unwrap_or("A"));
            rules.push(json!({"record": record, "expr": substitute(expr)}));
        }
    }
    json!({"groups": [{"name": "dashboard-queries", "rules": rules}]})
}

/// A Grafana query as plain PromQL: `$__rate_interval` and the other interval variables become
/// `5m`, every other `$var` or `${var}` becomes `x` (they only ever stand in label values).
fn substitute(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = match after.strip_prefix('{') {
            Some(braced) => match braced.find('}') {
                Some(end) => (&braced[..end], &braced[end + 1..]),
                None => (braced, ""),
            },
            None => {
                let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        out.push_str(match name {
            "__rate_interval" | "__interval" | "__range" => "5m",
            _ => "x",
        });
        rest = tail;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_candidate_of_apt_cache_policy() {
        let policy = "prometheus:\n  Installed: (none)\n  Candidate: 2.42.0+ds-5+deb12u1\n  Version table:\n";
        assert_eq!(parse_candidate(policy).as_deref(), Some("2.42.0+ds-5+deb12u1"));
        assert_eq!(parse_candidate("prometheus:\n  Installed: (none)\n  Candidate: (none)\n"), None);
        assert_eq!(parse_candidate(""), None);
    }

    #[test]
    fn github_anchors_of_headings() {
        let md =
            "# Runbooks\n\n## MyOwnShellControllerDown\n\n```sh\n# not a heading\n```\n### What it means, and why?\n";
        let got = anchors(md);
        let want: Vec<&str> = vec!["myownshellcontrollerdown", "runbooks", "what-it-means-and-why"];
        assert_eq!(got.iter().map(String::as_str).collect::<Vec<_>>(), want);
    }

    #[test]
    fn lint_names_each_problem() {
        let good = format!("{RUNBOOK_URL}#down");
        let spec = json!({"groups": [{"name": "g", "rules": [
            {"record": "r", "expr": "1"},
            {"alert": "Down", "expr": "1", "labels": {"severity": "critical"},
             "annotations": {"summary": "s", "description": "d", "runbook_url": good}},
            {"alert": "Gone", "expr": "1", "labels": {"severity": "page"},
             "annotations": {"summary": "s", "runbook_url": format!("{RUNBOOK_URL}#gone")}},
            {"alert": "Elsewhere", "expr": "1", "labels": {"severity": "warning"},
             "annotations": {"summary": "s", "description": "d", "runbook_url": "https://example.com/#down"}},
        ]}]});
        let problems = lint(&spec, "## Down\n");
        assert_eq!(
            problems,
            vec![
                "Gone: severity \"page\" is none of [\"critical\", \"warning\"]".to_owned(),
                "Gone: no description annotation".to_owned(),
                format!("Gone: {RUNBOOKS} has no section #gone"),
                format!("Elsewhere: runbook_url \"https://example.com/#down\" does not point into {RUNBOOK_URL}#…"),
            ]
        );
        assert_eq!(lint(&json!({"groups": []}), ""), vec!["no alerts at all".to_owned()]);
    }

    #[test]
    fn grafana_variables_become_promql() {
        assert_eq!(
            substitute("sum(rate(m{namespace=\"$namespace\",job=~\"${job}\"}[$__rate_interval]))"),
            "sum(rate(m{namespace=\"x\",job=~\"x\"}[5m]))"
        );
        assert_eq!(substitute("m[$__range] offset 1h"), "m[5m] offset 1h");
    }

    #[test]
    fn dashboard_queries_become_recording_rules() {
        let dashboard = json!({"panels": [
            {"id": 1, "type": "row", "panels": [{"id": 2, "targets": [{"refId": "B", "expr": "m[$__rate_interval]"}]}]},
            {"id": 3, "targets": [{"refId": "A", "expr": "up"}, {"refId": "C"}]},
        ]});
        let rules = dashboard_rules(&dashboard);
        assert_eq!(
            rules["groups"][0]["rules"],
            json!([{"record": "dashboard:query_3_A", "expr": "up"}, {"record": "dashboard:query_2_B", "expr": "m[5m]"}])
        );
    }
}
