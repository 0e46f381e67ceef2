//! What the Grafana dashboard (`config/grafana/myownshell.json`) and the alerts
//! (`config/prometheus`'s PrometheusRule) read is what the binaries export: the real controller
//! and webhook run against the test control plane, do a little work, and every metric name in
//! any dashboard query or alert expression shows up in their scrapes. A renamed metric breaks
//! this test instead of a panel or an alert, silently. Beside it, the rules' own checks that need
//! no promtool: every alert rule fires in at least one unit test of
//! `tests/prometheus/rules-test.yaml` (which `cargo xtask test` runs with promtool), the
//! pod-failure alert knows every pod-failure reason, and an overlay can leave the rules out.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use myownshell_api::names::reasons::{self, Use};
use myownshell_envtest::assets::workspace_root;
use myownshell_envtest::kustomize::{of_kind, render};
use myownshell_envtest::ports::free_port;
use myownshell_tests::controller::{ControllerTest, metric_value, sized_shell};
use myownshell_tests::shell_pods::{self, waiting};
use myownshell_tests::webhooks::{InstalledWebhooks, Target, WebhookOptions, WebhookProcess, wait_until_defaulting};
use serde_json::Value;

const DASHBOARD: &str = "config/grafana/myownshell.json";
const RULE_TESTS: &str = "tests/prometheus/rules-test.yaml";
/// Series Prometheus writes itself for every target (no binary exports them).
const PROMETHEUS_SERIES: [&str; 1] = ["up"];

/// PromQL words that are not metric names: operators, modifiers, and the aggregations, which
/// may stand before `by (…)` rather than right before their `(`.
const KEYWORDS: &str = "and or unless by without on ignoring group_left group_right bool offset atan2 \
    sum min max avg group stddev stdvar count count_values bottomk topk quantile inf nan";
/// Keywords followed by a parenthesised list of label names.
const LABEL_LISTS: &str = "by without on ignoring group_left group_right";

/// The metric names a PromQL expression selects. A name is an identifier (`[a-zA-Z_:][a-zA-Z0-9_:]*`)
/// in expression position: not a keyword or aggregation, not followed by `(` (a function), and
/// not inside a string, a label matcher `{…}`, a range or subquery `[…]`, a label list
/// (`by (…)`, `on (…)`, …) or a comment. Grafana variables (`$x`, `${x}`) are skipped; numbers
/// and durations (`14.4`, `1e3`, `offset 5m`) too.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            '"' | '\'' | '`' => i = skip_string(&chars, i),
            '{' => i = skip_to(&chars, i, '}'),
            '[' => i = skip_to(&chars, i, ']'),
            '#' => i = chars[i..].iter().position(|&c| c == '\n').map_or(chars.len(), |p| i + p),
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    i = skip_to(&chars, i, '}');
                } else {
                    while chars.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_') {
                        i += 1;
                    }
                }
            }
            c if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) => {
                while chars.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '_') {
                    // An exponent's sign: 1e-3.
                    if matches!(chars[i], 'e' | 'E') && matches!(chars.get(i + 1), Some('-' | '+')) {
                        i += 1;
                    }
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while chars.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut next = i;
                while chars.get(next).is_some_and(|c| c.is_whitespace()) {
                    next += 1;
                }
                let call = chars.get(next) == Some(&'(');
                if call && LABEL_LISTS.split_whitespace().any(|k| k == word) {
                    i = skip_to(&chars, next, ')');
                } else if !call && !KEYWORDS.split_whitespace().any(|k| k == word) {
                    names.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

/// The index just past the string literal that starts at `start` (backslash escapes, except
/// in backquoted raw strings).
fn skip_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while let Some(&c) = chars.get(i) {
        if c == '\\' && quote != '`' {
            i += 2;
            continue;
        }
        i += 1;
        if c == quote {
            break;
        }
    }
    i
}

/// The index just past the `close` that ends the bracket opened at `start`, strings inside
/// skipped.
fn skip_to(chars: &[char], start: usize, close: char) -> usize {
    let mut i = start + 1;
    while let Some(&c) = chars.get(i) {
        match c {
            '"' | '\'' | '`' => i = skip_string(chars, i),
            c if c == close => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Every query of the dashboard: panel targets (rows' nested panels too) and the series
/// selector of `label_values(selector, label)` variables.
fn dashboard_queries() -> Vec<String> {
    let path = workspace_root().join(DASHBOARD);
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut queries = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = panels.pop() {
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        queries.extend(
            panel["targets"].as_array().into_iter().flatten().filter_map(|t| t["expr"].as_str()).map(String::from),
        );
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        let query = variable["query"]["query"].as_str().or(variable["query"].as_str()).unwrap_or_default();
        if let Some(args) = query.strip_prefix("label_values(").and_then(|q| q.strip_suffix(')'))
            && let Some((selector, _label)) = args.rsplit_once(',')
        {
            queries.push(selector.to_owned());
        }
    }
    queries
}

/// The PrometheusRule's `.spec` as kustomize renders `config/prometheus`.
fn rule_spec() -> Value {
    let objects = render("prometheus").unwrap();
    let rules = of_kind(&objects, "PrometheusRule");
    assert_eq!(rules.len(), 1, "config/prometheus renders one PrometheusRule");
    rules[0]["spec"].clone()
}

fn rules(spec: &Value) -> impl Iterator<Item = &Value> {
    spec["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap())
}

/// Metric names read by the dashboard and the alerts that a binary must export: recorded
/// series of the rule file and [`PROMETHEUS_SERIES`] left out.
fn names_read() -> BTreeSet<String> {
    let spec = rule_spec();
    let recorded: BTreeSet<&str> = rules(&spec).filter_map(|r| r["record"].as_str()).collect();
    let exprs = rules(&spec).map(|r| r["expr"].as_str().unwrap().to_owned()).chain(dashboard_queries());
    exprs
        .flat_map(|e| metric_names(&e))
        .filter(|n| !recorded.contains(n.as_str()) && !PROMETHEUS_SERIES.contains(&n.as_str()))
        .collect()
}

/// The sample names of a scrape (`_bucket`, `_count`, `_sum`, `_total` included, as queries
/// name them).
fn sample_names(scrape: &str) -> BTreeSet<String> {
    scrape
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(String::from)
        .collect()
}

#[test]
fn metric_names_are_told_from_functions_labels_and_variables() {
    let names = |e: &str| metric_names(e).into_iter().collect::<Vec<_>>();
    assert_eq!(
        names(
            "histogram_quantile(0.99, sum by (le, pod) (rate(a_bucket{namespace=\"$namespace\",le=~\"1(\\\\.0)?\"}[$__rate_interval])))"
        ),
        ["a_bucket"]
    );
    assert_eq!(names("absent(up{job=\"x\"} == 1)"), ["up"]);
    assert_eq!(names("sum without (instance) (b) / on (job) group_left (pod) c > 0.05"), ["b", "c"]);
    assert_eq!(names("x:ratio1h > (14.4 * 0.01)\nand\ny offset 5m > 1e-3 # z is a comment"), ["x:ratio1h", "y"]);
    assert_eq!(names("count_values(\"v\", d) or label_replace(e, \"dst\", \"$1\", \"src\", \"(f)\")"), ["d", "e"]);
    assert_eq!(names("sum(rate(g[5m:1m])) bool == on() h"), ["g", "h"]);
    assert_eq!(names("{__name__=\"i\"} + j{a=\"}\"}"), ["j"], "a bare selector names no metric by itself");
    assert_eq!(
        names("max by (pod) (myownshell_controller_leader{namespace=\"${namespace}\"})"),
        ["myownshell_controller_leader"]
    );
}

#[test]
fn the_dashboard_and_the_alerts_read_metrics() {
    let names = names_read();
    // The extraction must find something: a parser that sees nothing would pass the live test.
    for expected in [
        "myownshell_controller_reconcile_queue_latency_seconds_bucket",
        "myownshell_controller_shells_degraded",
        "myownshell_webhook_connections_total",
        "myownshell_webhook_certificate_trusted",
    ] {
        assert!(names.contains(expected), "{expected} not among {names:?}");
    }
    for query in dashboard_queries() {
        assert!(!metric_names(&query).is_empty(), "a dashboard query that reads no metric: {query}");
    }
}

/// Each alert rule (a name, and for the burn-rate alerts its windows) fires in some unit test:
/// an `alert_rule_test` of its name expects an alert whose labels include the rule's own.
#[test]
fn every_alert_rule_fires_in_a_unit_test() {
    let text = std::fs::read_to_string(workspace_root().join(RULE_TESTS)).unwrap();
    let tests: Value = serde_saphyr::from_str(&text).unwrap();
    let mut fired: Vec<(String, Value)> = Vec::new();
    for test in tests["tests"].as_array().unwrap() {
        for case in test["alert_rule_test"].as_array().into_iter().flatten() {
            for alert in case["exp_alerts"].as_array().into_iter().flatten() {
                fired.push((case["alertname"].as_str().unwrap().to_owned(), alert["exp_labels"].clone()));
            }
        }
    }
    let spec = rule_spec();
    for rule in rules(&spec).filter(|r| r["alert"].is_string()) {
        let name = rule["alert"].as_str().unwrap();
        let labels = rule["labels"].as_object().unwrap();
        let tested = fired.iter().any(|(n, got)| n == name && labels.iter().all(|(k, v)| &got[k] == v));
        assert!(tested, "no unit test in {RULE_TESTS} expects {name} {labels:?} to fire");
    }
}

/// MyOwnShellShellsFailingToStart matches exactly the reasons the controller gives when a
/// shell's pods cannot run (`Use::PodFailure`): a new one must join the alert and its runbook.
#[test]
fn shells_failing_to_start_matches_every_pod_failure_reason() {
    let spec = rule_spec();
    let rule = rules(&spec).find(|r| r["alert"] == "MyOwnShellShellsFailingToStart").unwrap();
    let expr = rule["expr"].as_str().unwrap();
    let alternatives = expr.split("reason=~\"").nth(1).and_then(|r| r.split('"').next()).unwrap();
    let in_alert: BTreeSet<&str> = alternatives.split('|').collect();
    let pod_failures: BTreeSet<&str> =
        reasons::ALL.iter().filter(|r| r.uses.contains(&Use::PodFailure)).map(|r| r.name).collect();
    assert_eq!(in_alert, pod_failures);
}

/// An overlay that adds the component `config/prometheus/without-rules` gets the
/// ServiceMonitors and the binding without the PrometheusRule.
#[test]
fn an_overlay_can_leave_the_rules_out() {
    let overlay = tempfile::tempdir().unwrap();
    // kustomize wants relative paths: up to `/`, then down to the workspace.
    let up = "../".repeat(overlay.path().components().count() - 1);
    let config =
        format!("{up}{}", workspace_root().join("config/prometheus").display().to_string().trim_start_matches('/'));
    let kustomization = format!("resources: [{config}]\ncomponents: [{config}/without-rules]\n");
    std::fs::write(overlay.path().join("kustomization.yaml"), kustomization).unwrap();
    let out = std::process::Command::new(myownshell_envtest::kubectl::kubectl_binary())
        .arg("kustomize")
        .arg(overlay.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let objects: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let kinds: BTreeSet<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, BTreeSet::from(["ClusterRoleBinding", "ServiceMonitor"]));
    assert_eq!(of_kind(&render("prometheus").unwrap(), "PrometheusRule").len(), 1, "config/prometheus has it");
}

/// The live half: the controller and the webhook export every name the dashboard and the alerts
/// read, once they have done what they count (a shell admitted and reconciled, one of its pods
/// unable to pull its image), and the SLO buckets are spelled as the rules match them.
#[tokio::test]
async fn the_binaries_export_every_metric_the_dashboard_and_the_alerts_read() {
    let t = ControllerTest::start("dashboard").await;
    let port = free_port().unwrap();
    let target = Target { base_url: format!("https://127.0.0.1:{port}"), ca_bundle: None, namespace: t.ns.clone() };
    let installed = InstalledWebhooks::install(&t.client, &t.ns, &target).await.unwrap();
    let mut webhook = WebhookProcess::spawn(t.cp, &WebhookOptions::for_installed(&installed, &t.ns, port)).unwrap();
    webhook.wait_ready(Duration::from_secs(60)).await.unwrap();
    wait_until_defaulting(&t.client, &t.ns, "probe", Duration::from_secs(30)).await.unwrap();

    // Through both admission webhooks, then reconciled into a Deployment.
    let created = t.shells.create(&PostParams::default(), &sized_shell("web", 1)).await.unwrap();
    assert!(created.metadata.finalizers.is_some(), "admitted through the mutating webhook");
    t.replicas_become("web", 1).await;
    // A pod that cannot pull its image: the shell turns Degraded, which the gauge counts.
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.ns);
    shell_pods::create(&pods, "web", "a1", None, waiting("ImagePullBackOff", "Back-off pulling image")).await.unwrap();
    let degraded = "myownshell_controller_shells_degraded{reason=\"ImagePullFailed\"}";
    assert_eq!(t.settled_metric(degraded).await, 1.0, "{degraded}");

    let controller = t.controller.metrics().await.unwrap();
    let webhook_scrape = webhook.metrics(&t.client).await.unwrap();
    let exported: BTreeSet<String> = sample_names(&controller).union(&sample_names(&webhook_scrape)).cloned().collect();
    let read = names_read();
    let missing: Vec<&String> = read.iter().filter(|n| !exported.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "read by the dashboard or the alerts but not exported: {missing:?}\nexported: {exported:?}"
    );

    // The rules match `le=~"1(\\.0)?"` and `le=~"5(\\.0)?"`: the exporter writes the first form.
    for (histogram, le) in [
        ("myownshell_controller_reconcile_queue_latency_seconds", "1.0"),
        ("myownshell_controller_reconcile_duration_seconds", "5.0"),
    ] {
        let bucket = format!("{histogram}_bucket{{le=\"{le}\"}}");
        assert!(metric_value(&controller, &bucket).is_some(), "{bucket} not in:\n{controller}");
    }
    installed.remove().await.unwrap();
}
