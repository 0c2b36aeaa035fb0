//! The operations files against the real thing: `docs/operations/alerts.yml` passes
//! `promtool check rules` and its unit tests (`alerts_test.yml`: each alert fires on the samples of
//! a broken job, none on a healthy cluster); every metric and label the rules and
//! `grafana-dashboard.json` read is one that a real `/metrics` scrape serves; that scrape keeps one
//! series per cronguard job under a default Prometheus scrape config (the label `cronguard_job`,
//! never `job` or `instance`) with histograms as `_bucket` series of cronguard's buckets; and a
//! real `prometheus` server scraping it counts one series per job, raises the rules' alerts and
//! answers every query of the dashboard.
//! `/livez` answers 200 while the scheduler runs and 503 after it stopped, whatever the guards do.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronguard::guard::{Claim, Guard, GuardError, Lease, Renewal};
use cronguard::{Job, Lock, Overlap, Schedule};

mod common;
use common::{eventually, get, serve};

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send + 'static>>;

fn ops_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/operations")
        .join(name)
}

fn read_ops_file(name: &str) -> String {
    let path = ops_file(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether `promtool` and `prometheus` (Debian's `prometheus` package) can run; in CI
/// (`CRONGUARD_TESTS_REQUIRE_PROMTOOL` or `CI` set) a panic when they cannot.
fn prometheus_installed(program: &str) -> bool {
    let required = std::env::var_os("CRONGUARD_TESTS_REQUIRE_PROMTOOL").is_some()
        || cronguard_testkit::in_ci();
    cronguard_testkit::require_program(
        program,
        "the tests of the Prometheus rules and of a real scrape",
        "apt-get install prometheus",
        required,
    )
}

/// Runs `promtool args` in `docs/operations`, failing the test with its output unless it succeeds.
fn promtool(args: &[&str]) {
    let out = std::process::Command::new("promtool")
        .args(args)
        .current_dir(ops_file(""))
        .output()
        .expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool {}:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_alert_rules_are_valid_and_each_fires_on_its_samples_only() {
    if !prometheus_installed("promtool") {
        return;
    }
    promtool(&["check", "rules", "alerts.yml"]);
    promtool(&["test", "rules", "alerts_test.yml"]);
}

/// Every query of the dashboard: its PromQL (`expr`), or the template's `label_values(...)`.
fn dashboard_queries(dashboard: &serde_json::Value) -> (Vec<String>, Vec<String>) {
    fn walk(v: &serde_json::Value, exprs: &mut Vec<String>, legends: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    match (key.as_str(), value.as_str()) {
                        ("expr" | "definition", Some(s)) => exprs.push(s.to_owned()),
                        ("legendFormat", Some(s)) => legends.push(s.to_owned()),
                        _ => walk(value, exprs, legends),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                items.iter().for_each(|i| walk(i, exprs, legends));
            }
            _ => {}
        }
    }
    let (mut exprs, mut legends) = (Vec::new(), Vec::new());
    walk(dashboard, &mut exprs, &mut legends);
    (exprs, legends)
}

/// A dashboard query as plain PromQL: Grafana's variables replaced by what they stand for.
fn as_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$cronguard_job", ".*")
}

#[test]
fn the_dashboards_queries_are_valid_promql() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read_ops_file("grafana-dashboard.json")).expect("valid JSON");
    let (exprs, _) = dashboard_queries(&dashboard);
    let exprs: Vec<String> = exprs
        .iter()
        .filter(|e| !e.starts_with("label_values("))
        .map(|e| as_promql(e))
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    if !prometheus_installed("promtool") {
        return;
    }
    // promtool checks PromQL in rule files: one recording rule per query.
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, expr) in exprs.iter().enumerate() {
        let quoted = serde_json::to_string(expr).expect("a string");
        rules.push_str(&format!(
            "      - record: dashboard_query_{i}\n        expr: {quoted}\n"
        ));
    }
    let path = std::env::temp_dir().join(format!(
        "cronguard-dashboard-queries-{}.yml",
        std::process::id()
    ));
    std::fs::write(&path, rules).expect("a temporary file");
    let path_arg = path.to_string_lossy().into_owned();
    let out = std::process::Command::new("promtool")
        .args(["check", "rules", &path_arg])
        .output()
        .expect("promtool runs");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A store that refuses every claim; its clock runs 250 ms ahead.
struct Unreachable;

impl Guard for Unreachable {
    fn claim(&self, _: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        Box::pin(async { Err(GuardError::other("connection refused")) })
    }

    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        Box::pin(async { Err(GuardError::other("connection refused")) })
    }

    fn server_time(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        Box::pin(async { Ok(Some(Utc::now() + chrono::TimeDelta::milliseconds(250))) })
    }
}

/// A store that grants every claim a lease it never renews: every run loses its lease.
struct LosesLeases {
    lease: Duration,
    tokens: AtomicU64,
}

struct Unrenewable {
    token: u64,
    lease: Duration,
    sent: tokio::time::Instant,
}

impl Lease for Unrenewable {
    fn fencing_token(&self) -> u64 {
        self.token
    }

    fn expiry(&self) -> Option<(Duration, tokio::time::Instant)> {
        Some((self.lease, self.sent))
    }

    fn renew(&self) -> BoxFuture<Result<Renewal, GuardError>> {
        Box::pin(async { Ok(Renewal::Lost) })
    }

    fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>> {
        Box::pin(async { Ok(()) })
    }
}

impl Guard for LosesLeases {
    fn claim(&self, _: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        let lease = Unrenewable {
            token: self.tokens.fetch_add(1, Ordering::SeqCst) + 1,
            lease: self.lease,
            sent: tokio::time::Instant::now(),
        };
        Box::pin(async move { Ok(Claim::Acquired(Box::new(lease))) })
    }

    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        Box::pin(async { Ok(None) })
    }

    fn server_time(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        Box::pin(async { Ok(Some(Utc::now() + chrono::TimeDelta::milliseconds(250))) })
    }
}

/// One series of a `/metrics` scrape: the family it belongs to, its name and its labels.
struct Series {
    family: String,
    name: String,
    labels: BTreeMap<String, String>,
}

/// The families of a Prometheus text scrape (`# TYPE` lines) and its series, each series under
/// the family whose name it extends (`_bucket`, `_sum`, `_count` of a histogram).
fn parse_scrape(text: &str) -> (BTreeMap<String, String>, Vec<Series>) {
    let mut families = BTreeMap::new();
    let mut series = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("`# TYPE name kind`");
            families.insert(name.to_owned(), kind.to_owned());
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (name, labels) = match line.split_once('{') {
            Some((name, rest)) => {
                let (labels, _) = rest.rsplit_once('}').expect("a closing brace");
                (name, labels)
            }
            None => (line.split_whitespace().next().unwrap_or(line), ""),
        };
        let labels = labels
            .split("\",")
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (key, value) = l.split_once("=\"").expect("label=\"value\"");
                (key.to_owned(), value.trim_end_matches('"').to_owned())
            })
            .collect();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                let base = name.strip_suffix(suffix)?;
                (families.get(base).map(String::as_str) == Some("histogram")).then_some(base)
            })
            .unwrap_or(name);
        series.push(Series {
            family: family.to_owned(),
            name: name.to_owned(),
            labels,
        });
    }
    (families, series)
}

/// What a PromQL expression reads: metric names, and label names with the metric whose selector
/// names them (`None` for a grouping clause).
#[derive(Default, Debug)]
struct Reads {
    metrics: BTreeSet<String>,
    labels: BTreeSet<(Option<String>, String)>,
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// A small PromQL reader: enough to find metric names, selector labels and grouping labels.
fn promql_reads(expr: &str, reads: &mut Reads) {
    const KEYWORDS: [&str; 6] = ["and", "or", "unless", "bool", "offset", "inf"];
    // Aggregations may put their grouping before their parenthesis: `sum by (x) (...)`.
    const AGGREGATIONS: [&str; 12] = [
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
    ];
    const GROUPING: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut last_metric: Option<String> = None;
    let next_non_space = |mut j: usize| {
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        j
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '[' {
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
        } else if c == '{' {
            // `label op "value"` pairs up to the closing brace.
            i += 1;
            while i < chars.len() && chars[i] != '}' {
                if is_ident(chars[i]) {
                    let start = i;
                    while i < chars.len() && is_ident(chars[i]) {
                        i += 1;
                    }
                    let label: String = chars[start..i].iter().collect();
                    reads.labels.insert((last_metric.clone(), label));
                } else if chars[i] == '"' {
                    i += 1;
                    while i < chars.len() && chars[i] != '"' {
                        i += if chars[i] == '\\' { 2 } else { 1 };
                    }
                    i += 1;
                } else {
                    i += 1;
                }
            }
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (is_ident(chars[i]) || chars[i] == '.') {
                i += 1;
            }
        } else if is_ident(c) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let after = next_non_space(i);
            if GROUPING.contains(&word.as_str()) {
                if chars.get(after) == Some(&'(') {
                    let close = chars[after..]
                        .iter()
                        .position(|&c| c == ')')
                        .map_or(chars.len(), |p| after + p);
                    let list: String = chars[after + 1..close].iter().collect();
                    for label in list.split(',').map(str::trim).filter(|l| !l.is_empty()) {
                        reads.labels.insert((None, label.to_owned()));
                    }
                    i = close + 1;
                }
            } else if chars.get(after) == Some(&'(')
                || KEYWORDS.contains(&word.as_str())
                || AGGREGATIONS.contains(&word.as_str())
            {
                // a function or an operator
            } else {
                reads.metrics.insert(word.clone());
                last_metric = Some(word);
            }
        } else {
            i += 1;
        }
    }
}

/// The PromQL of every `expr:` of a Prometheus rule file (one line, or a `>-` block), and every
/// label its templates read (`$labels.name`).
fn rule_exprs_and_template_labels(rules: &str) -> (Vec<String>, BTreeSet<String>) {
    let mut exprs = Vec::new();
    let lines: Vec<&str> = rules.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let Some(value) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let value = value.trim();
        if value.starts_with('>') || value.starts_with('|') {
            let indent = line.len() - line.trim_start().len();
            let block: Vec<&str> = lines[n + 1..]
                .iter()
                .take_while(|l| l.len() - l.trim_start().len() > indent)
                .map(|l| l.trim())
                .collect();
            exprs.push(block.join(" "));
        } else {
            exprs.push(value.to_owned());
        }
    }
    let labels = rules
        .match_indices("$labels.")
        .map(|(at, m)| {
            rules[at + m.len()..]
                .chars()
                .take_while(|&c| is_ident(c))
                .collect()
        })
        .collect();
    (exprs, labels)
}

/// Checks every metric and label the alert rules and the dashboard read against a scrape.
fn check_ops_files_read_what_is_served(scrape: &str) {
    let (families, series) = parse_scrape(scrape);
    let mut labels_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for s in &series {
        let entry = labels_of.entry(s.family.as_str()).or_default();
        entry.extend(s.labels.keys().map(String::as_str));
    }
    // The scraped process and the scrape job: Prometheus' own target labels.
    let target_labels = ["instance"];
    let all_labels: BTreeSet<&str> = labels_of.values().flatten().copied().collect();

    let mut reads = Reads::default();
    let (rule_exprs, mut template_labels) =
        rule_exprs_and_template_labels(&read_ops_file("alerts.yml"));
    assert!(rule_exprs.len() >= 8, "{rule_exprs:?}");
    for expr in &rule_exprs {
        promql_reads(expr, &mut reads);
    }
    let dashboard: serde_json::Value =
        serde_json::from_str(&read_ops_file("grafana-dashboard.json")).expect("valid JSON");
    let (dashboard_exprs, legends) = dashboard_queries(&dashboard);
    for expr in &dashboard_exprs {
        if let Some(args) = expr
            .strip_prefix("label_values(")
            .and_then(|a| a.strip_suffix(')'))
        {
            let (metric, label) = args.split_once(',').expect("label_values(metric, label)");
            reads.metrics.insert(metric.trim().to_owned());
            reads
                .labels
                .insert((Some(metric.trim().to_owned()), label.trim().to_owned()));
        } else {
            promql_reads(&as_promql(expr), &mut reads);
        }
    }
    for legend in &legends {
        for (at, _) in legend.match_indices("{{") {
            let label: String = legend[at + 2..]
                .chars()
                .filter(|c| !c.is_whitespace())
                .take_while(|&c| is_ident(c))
                .collect();
            template_labels.insert(label);
        }
    }

    let cronguard_metrics: BTreeSet<&String> = reads
        .metrics
        .iter()
        .filter(|m| m.starts_with("cronguard_"))
        .collect();
    assert!(cronguard_metrics.len() >= 12, "{cronguard_metrics:?}");
    assert_eq!(
        reads.metrics.len(),
        cronguard_metrics.len(),
        "only cronguard's metrics: {:?}",
        reads.metrics
    );
    let family_of = |metric: &str| -> Option<String> {
        if families.contains_key(metric) {
            return Some(metric.to_owned());
        }
        ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
            let base = metric.strip_suffix(suffix)?;
            (families.get(base).map(String::as_str) == Some("histogram")).then(|| base.to_owned())
        })
    };
    for metric in &cronguard_metrics {
        let family = family_of(metric).unwrap_or_else(|| {
            panic!("`{metric}`, read by the operations files, is not served by /metrics:\n{scrape}")
        });
        assert!(
            series.iter().any(|s| &s.name == *metric),
            "`{metric}` has no series in the scrape:\n{scrape}"
        );
        assert!(
            scrape.contains(&format!("# HELP {family} ")),
            "`{family}` has no help text"
        );
    }
    for (metric, label) in &reads.labels {
        assert!(
            label != "job" && label != "exported_job",
            "a query groups or selects by `{label}`, Prometheus' scrape job: use `cronguard_job`"
        );
        match metric.as_deref().and_then(family_of) {
            Some(family) if label != "le" => assert!(
                labels_of
                    .get(family.as_str())
                    .is_some_and(|l| l.contains(label.as_str())),
                "`{}` has no label `{label}` in the scrape",
                family
            ),
            _ => assert!(
                all_labels.contains(label.as_str()) || target_labels.contains(&label.as_str()),
                "`{label}` is not a label of cronguard's series nor a target label"
            ),
        }
    }
    for label in &template_labels {
        assert!(
            all_labels.contains(label.as_str()) || target_labels.contains(&label.as_str()),
            "a template reads `{label}`, which no series carries"
        );
    }
}

/// Every series carries `cronguard_job` (except the clock skew, per guard) and neither of the
/// target labels; every histogram is a Prometheus histogram with cronguard's buckets.
fn check_series_labels_and_buckets(scrape: &str) {
    let (families, series) = parse_scrape(scrape);
    let cronguard: Vec<&Series> = series
        .iter()
        .filter(|s| s.family.starts_with("cronguard_"))
        .collect();
    for &name in cronguard::metrics::NAMES {
        assert!(
            cronguard.iter().any(|s| s.family == name),
            "no series of `{name}`:\n{scrape}"
        );
    }
    for s in &cronguard {
        for target in ["job", "instance", "exported_job"] {
            assert!(
                !s.labels.contains_key(target),
                "`{}` carries the label `{target}`, which a scrape would rename",
                s.name
            );
        }
        if s.family != "cronguard_clock_skew_seconds" {
            assert!(
                s.labels.contains_key(cronguard::metrics::JOB_LABEL),
                "`{}` {:?} does not name its job",
                s.name,
                s.labels
            );
        }
    }
    for &(name, buckets) in cronguard::metrics::BUCKETS {
        assert_eq!(
            families.get(name).map(String::as_str),
            Some("histogram"),
            "a histogram, not a summary"
        );
        let jobs: BTreeSet<&str> = cronguard
            .iter()
            .filter(|s| s.name == format!("{name}_bucket"))
            .filter_map(|s| s.labels.get("cronguard_job").map(String::as_str))
            .collect();
        assert!(!jobs.is_empty(), "`{name}` has no buckets:\n{scrape}");
        for job in jobs {
            let bounds: Vec<f64> = cronguard
                .iter()
                .filter(|s| s.name == format!("{name}_bucket"))
                .filter(|s| s.labels.get("cronguard_job").map(String::as_str) == Some(job))
                .filter_map(|s| s.labels.get("le"))
                .map(|le| match le.as_str() {
                    "+Inf" => f64::INFINITY,
                    le => le.parse().expect("a bucket bound"),
                })
                .collect();
            let mut expected = buckets.to_vec();
            expected.push(f64::INFINITY);
            assert_eq!(bounds, expected, "the buckets of `{name}` for `{job}`");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_prometheus_keeps_one_series_per_job_and_the_ops_files_read_what_is_served() {
    let prometheus = cronguard::metrics::prometheus_builder()
        .install_recorder()
        .expect("the only recorder of this test binary");
    let every = |ms| Schedule::every(Duration::from_millis(ms)).expect("valid");
    let tick = Job::new("tick", every(300)).run(|_| async {});
    // Its first run never ends: the next fire waits for the slot and misfires.
    let stuck = Job::new("stuck", every(300))
        .overlap(Overlap::Queue)
        .misfire_grace(Duration::from_millis(200))
        .run(|ctx| async move { ctx.cancelled().await });
    // Its first run never ends: every later fire is skipped.
    let busy = Job::new("busy", every(300))
        .overlap(Overlap::Skip)
        .run(|ctx| async move { ctx.cancelled().await });
    let unreachable = Job::new("unreachable_store", every(300))
        .lock(Lock::custom("down"))
        .misfire_grace(Duration::from_millis(200))
        .run(|_| async {});
    let short_lease = Job::new("short_lease", every(300))
        .lock(Lock::custom("unrenewable"))
        .lease(Duration::from_millis(300))
        .run(|ctx| async move { ctx.cancelled().await });
    let jobs = ["tick", "stuck", "busy", "unreachable_store", "short_lease"];
    let handle = cronguard::builder()
        .registered_jobs(false)
        .custom_guard("down", |_| Arc::new(Unreachable))
        .custom_guard("unrenewable", |spec| {
            Arc::new(LosesLeases {
                lease: spec.lease,
                tokens: AtomicU64::new(0),
            })
        })
        .job(tick)
        .job(stuck)
        .job(busy)
        .job(unreachable)
        .job(short_lease)
        .start()
        .await
        .expect("starts");
    let monitor = handle.monitor();
    let addr = serve(monitor.clone(), prometheus).await;

    eventually(
        "a success, an overdue job, a skipped fire, a guard error and a lost lease",
        Duration::from_secs(10),
        || async {
            let body = get(addr, "/metrics").await.1;
            body.contains(r#"cronguard_last_success_timestamp_seconds{cronguard_job="tick"}"#)
                && body.contains(r#"cronguard_job_overdue{cronguard_job="stuck"} 1"#)
                && body.contains(
                    r#"cronguard_dropped_fires_total{cronguard_job="busy",reason="skipped"}"#,
                )
                && body.contains(
                    r#"cronguard_guard_errors_total{cronguard_job="unreachable_store",kind="other"}"#,
                )
                && body.contains(r#"cronguard_lease_lost_total{cronguard_job="short_lease"}"#)
                && body.contains(r#"cronguard_clock_skew_seconds{guard="custom"}"#)
        },
    )
    .await;
    let (code, scrape) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    check_series_labels_and_buckets(&scrape);
    check_ops_files_read_what_is_served(&scrape);

    if prometheus_installed("prometheus") {
        let server = PrometheusServer::start(addr, &ops_file("alerts.yml"));
        server.one_series_per_job_and_the_alerts(&jobs).await;
        server.dashboard_queries_answer().await;
    }

    // The guard of `unreachable_store` cannot be asked: /health says so, /livez does not care.
    let (code, body) = get(addr, "/health").await;
    assert_eq!(code, 503, "{body}");
    let (code, body) = get(addr, "/livez").await;
    assert_eq!(code, 200, "{body}");

    handle.shutdown_within(Duration::ZERO).await;
    assert!(!monitor.alive());
    let (code, _) = get(addr, "/livez").await;
    assert_eq!(code, 503, "the scheduler stopped");
}

/// A `prometheus` server on a free loopback port, scraping one target every 200 ms with a
/// default scrape config (no `honor_labels`, no relabelling) and evaluating a rule file; killed
/// and its storage removed on drop.
struct PrometheusServer {
    port: u16,
    dir: PathBuf,
    child: std::process::Child,
}

impl PrometheusServer {
    fn start(target: std::net::SocketAddr, rules: &Path) -> PrometheusServer {
        let dir = std::env::temp_dir().join(format!(
            "cronguard-prometheus-{}-{}",
            std::process::id(),
            Utc::now().timestamp_nanos_opt().unwrap_or_default()
        ));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let config = format!(
            "global:\n  scrape_interval: 200ms\n  evaluation_interval: 200ms\n\
             rule_files:\n  - {rules}\n\
             scrape_configs:\n  - job_name: app\n    static_configs:\n      - targets: [\"{target}\"]\n",
            rules = rules.display()
        );
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config).expect("writes the config");
        let port = cronguard_testkit::free_port();
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).expect("a log file"))
            .spawn()
            .expect("prometheus starts");
        PrometheusServer { port, dir, child }
    }

    /// An instant query through the HTTP API: the result vector.
    async fn query(&self, promql: &str) -> Option<Vec<serde_json::Value>> {
        let encoded: String = promql
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let body = http10_get(self.port, &format!("/api/v1/query?query={encoded}")).await?;
        let json: serde_json::Value = serde_json::from_str(&body).ok()?;
        json["data"]["result"].as_array().cloned()
    }

    /// `label` of each element of a query's result.
    async fn label_values(&self, promql: &str, label: &str) -> BTreeSet<String> {
        self.query(promql)
            .await
            .unwrap_or_default()
            .iter()
            .filter_map(|s| s["metric"][label].as_str().map(str::to_owned))
            .collect()
    }

    async fn one_series_per_job_and_the_alerts(&self, jobs: &[&str]) {
        let expected: BTreeSet<String> = jobs.iter().map(|j| (*j).to_owned()).collect();
        let log = self.dir.join("log");
        let per_job = "count by (cronguard_job) (cronguard_next_fire_timestamp_seconds)";
        let waited = tokio::time::timeout(Duration::from_secs(20), async {
            while self.label_values(per_job, "cronguard_job").await != expected {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "Prometheus did not count one series per job within 20 s; its log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let counts = self.query(per_job).await.unwrap_or_default();
        for count in &counts {
            assert_eq!(
                count["value"][1].as_str(),
                Some("1"),
                "one series per job: {counts:?}"
            );
        }
        let renamed = self
            .query(r#"{__name__=~"cronguard_.+", exported_job!=""}"#)
            .await
            .unwrap_or_default();
        assert!(renamed.is_empty(), "no label was renamed: {renamed:?}");
        assert_eq!(
            self.label_values("cronguard_runs_total", "job").await,
            BTreeSet::from(["app".to_owned()]),
            "`job` is the scrape job's"
        );

        // The rules group by `cronguard_job` on scraped series: each alert names its job.
        let wanted = [
            ("CronguardJobOverdue", "stuck"),
            ("CronguardFiresDropped", "busy"),
            ("CronguardGuardErrors", "unreachable_store"),
            ("CronguardLeaseLost", "short_lease"),
        ];
        let waited = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                let mut missing = Vec::new();
                for (alert, job) in wanted {
                    let query = format!(r#"ALERTS{{alertname="{alert}"}}"#);
                    let jobs = self.label_values(&query, "cronguard_job").await;
                    if !jobs.contains(job) {
                        missing.push((alert, job));
                    }
                }
                if missing.is_empty() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "not every alert came within 20 s: {:?}",
            self.query("ALERTS").await
        );
        let overdue = self
            .label_values(
                r#"ALERTS{alertname="CronguardJobOverdue"}"#,
                "cronguard_job",
            )
            .await;
        assert!(
            !overdue.contains("tick"),
            "a job that runs is not overdue: {overdue:?}"
        );
    }

    /// Every query of the dashboard answers with data from the scraped series.
    async fn dashboard_queries_answer(&self) {
        let dashboard: serde_json::Value =
            serde_json::from_str(&read_ops_file("grafana-dashboard.json")).expect("valid JSON");
        let (exprs, _) = dashboard_queries(&dashboard);
        for expr in exprs.iter().filter(|e| !e.starts_with("label_values(")) {
            let promql = as_promql(expr);
            let result = self.query(&promql).await;
            assert!(
                result.as_ref().is_some_and(|r| !r.is_empty()),
                "the dashboard's `{promql}` answered {result:?}"
            );
        }
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `GET path` over HTTP/1.0 (so that the answer comes whole, not chunked): the body of a 200.
async fn http10_get(port: u16, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?;
    (status == "200").then(|| body.to_owned())
}
