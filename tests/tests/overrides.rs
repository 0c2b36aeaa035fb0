//! Overrides of `#[scheduled]` jobs at start (docs/guide/overrides.md), on tokio's paused clock:
//! from variables (`Builder::overrides_from`, which takes the map `Builder::from_env` reads from
//! the environment, so these tests share no process-wide state) and from an overrides file. The
//! overridden schedule fires as overridden, a disabled job does not run, a bad value fails
//! `start()` with the macro's own message for it (read from the compile-fail tests' `.stderr`
//! files), and the status names where each value came from. The real environment is read in
//! `overrides_env.rs`, a test binary of its own.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use cronguard::{
    scheduled, Clock, Cronguard, Error, JobContext, OverrideSource, ProblemKind, State,
};
use tokio::sync::mpsc;

/// Where the jobs report their runs: (job, fire time).
struct Runs(mpsc::UnboundedSender<(&'static str, DateTime<Utc>)>);

/// Hourly by its attribute; the tests make it fire every few seconds.
#[scheduled(every = "1h", name = "reports::nightly")]
async fn nightly(ctx: JobContext, runs: State<Runs>) {
    let _ = runs.0.send(("reports::nightly", ctx.fire_time()));
}

/// Every 10 s by its attribute; the tests disable it.
#[scheduled(every = "10s", name = "cleanup")]
async fn cleanup(ctx: JobContext, runs: State<Runs>) {
    let _ = runs.0.send(("cleanup", ctx.fire_time()));
}

/// Half a second past a whole hour: no fire of either job at the start.
fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00.500Z")
        .expect("a valid instant")
        .with_timezone(&Utc)
}

/// Seconds past the hour of `t0`.
fn at(t: DateTime<Utc>) -> i64 {
    t.timestamp() - t0().timestamp()
}

/// A builder on the paused clock with the jobs' state, and the receiver of their runs.
fn builder() -> (
    cronguard::Builder,
    mpsc::UnboundedReceiver<(&'static str, DateTime<Utc>)>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let builder = cronguard::builder()
        .clock(Clock::anchored(t0()))
        .state(Runs(tx))
        .shutdown_timeout(std::time::Duration::ZERO)
        .overrides_from(Vec::<(String, String)>::new());
    (builder, rx)
}

/// The runs until `count` runs of `job`, as (job, second past the hour); the clock moves on by
/// itself while every task waits.
async fn runs_until(
    rx: &mut mpsc::UnboundedReceiver<(&'static str, DateTime<Utc>)>,
    job: &str,
    count: usize,
) -> Vec<(&'static str, i64)> {
    let mut runs = Vec::new();
    while runs.iter().filter(|(name, _)| *name == job).count() < count {
        let (name, fire) = rx.recv().await.expect("the scheduler runs");
        runs.push((name, at(fire)));
    }
    runs
}

/// An overrides file of its own for one test.
fn overrides_file(test: &str, text: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("cronguard-overrides-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let path = dir.join("overrides.toml");
    std::fs::write(&path, text).expect("written");
    path
}

/// The messages of `#[scheduled]`'s compile errors in `tests/ui/fail/<case>.stderr`.
fn macro_messages(case: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/ui/fail")
        .join(format!("{case}.stderr"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter_map(|line| line.strip_prefix("error: "))
        .map(str::to_owned)
        .collect()
}

/// The problems `start()` reports with `vars` as the environment's overrides.
async fn problems_of(vars: &[(&str, &str)]) -> Vec<cronguard::Problem> {
    let (builder, _rx) = builder();
    match builder.overrides_from(vars.iter().copied()).start().await {
        Err(Error::Config { problems }) => problems,
        Err(other) => panic!("not a configuration error: {other}"),
        Ok(handle) => {
            handle.shutdown().await;
            panic!("started with {vars:?}")
        }
    }
}

async fn stop(handle: Cronguard) {
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn variables_change_the_schedule_and_disable_a_job() {
    let (builder, mut rx) = builder();
    let handle = builder
        .overrides_from([
            ("CRONGUARD_JOB__REPORTS__NIGHTLY__EVERY", "10s"),
            ("CRONGUARD_JOB__CLEANUP__ENABLED", "false"),
            ("UNRELATED", "ignored"),
        ])
        .start()
        .await
        .expect("starts");
    let runs = runs_until(&mut rx, "reports::nightly", 3).await;
    assert_eq!(
        runs,
        [
            ("reports::nightly", 10),
            ("reports::nightly", 20),
            ("reports::nightly", 30)
        ],
        "every 10 s as overridden, and `cleanup` (every 10 s) never"
    );

    let monitor = handle.monitor();
    let nightly = monitor.job("reports::nightly").expect("registered");
    assert_eq!(nightly.schedule, "every 10s");
    assert_eq!(nightly.overrides.len(), 1);
    assert_eq!(nightly.overrides[0].setting, "every");
    assert_eq!(nightly.overrides[0].value, "10s");
    assert_eq!(
        nightly.overrides[0].source,
        OverrideSource::Environment {
            variable: "CRONGUARD_JOB__REPORTS__NIGHTLY__EVERY".to_owned()
        }
    );
    let cleanup = monitor.job("cleanup").expect("registered");
    assert!(!cleanup.enabled);
    assert_eq!(cleanup.counts.started, 0);
    let json = serde_json::to_value(&cleanup).expect("serializes");
    assert_eq!(
        json["overrides"],
        serde_json::json!([{
            "setting": "enabled",
            "value": "false",
            "source": { "kind": "environment", "variable": "CRONGUARD_JOB__CLEANUP__ENABLED" }
        }])
    );
    stop(handle).await;
}

#[tokio::test(start_paused = true)]
async fn a_file_overrides_by_name_and_a_variable_wins_over_it() {
    let path = overrides_file(
        "file",
        "# staging\n[[job]]\nname = \"reports::nightly\"\ncron = \"*/15 * * * * *\"\ntimeout = \"5s\"\n\n[[job]]\nname = \"cleanup\"\nenabled = false\n",
    );
    let (builder, mut rx) = builder();
    let handle = builder
        .overrides_file(&path)
        .overrides_from([("CRONGUARD_JOB__REPORTS__NIGHTLY__TIMEOUT", "7s")])
        .start()
        .await
        .expect("starts");
    let runs = runs_until(&mut rx, "reports::nightly", 3).await;
    assert_eq!(
        runs,
        [
            ("reports::nightly", 15),
            ("reports::nightly", 30),
            ("reports::nightly", 45)
        ]
    );
    let nightly = handle
        .monitor()
        .job("reports::nightly")
        .expect("registered");
    assert_eq!(nightly.description, "every 15 seconds (UTC)");
    let shown = path.display().to_string();
    let sources: Vec<(String, String, String)> = nightly
        .overrides
        .iter()
        .map(|o| (o.setting.clone(), o.value.clone(), o.source.to_string()))
        .collect();
    assert_eq!(
        sources,
        [
            (
                "cron".to_owned(),
                "*/15 * * * * *".to_owned(),
                format!("overrides file `{shown}:4`")
            ),
            (
                "timeout".to_owned(),
                "7s".to_owned(),
                "environment variable `CRONGUARD_JOB__REPORTS__NIGHTLY__TIMEOUT`".to_owned()
            ),
        ]
    );
    let cleanup = handle.monitor().job("cleanup").expect("registered");
    assert!(!cleanup.enabled);
    assert_eq!(
        serde_json::to_value(&cleanup.overrides[0].source).expect("serializes"),
        serde_json::json!({ "kind": "file", "path": shown, "line": 9 })
    );
    stop(handle).await;
    let _ = std::fs::remove_dir_all(path.parent().expect("a dir"));
}

/// A value the attribute refuses at compile time fails `start()` with the attribute's message,
/// after the job and the variable.
#[tokio::test]
async fn a_bad_value_fails_start_with_the_macros_message() {
    let cases: [(&str, &str, &str, usize); 6] = [
        (
            "REPORTS__NIGHTLY__CRON",
            "0 */5 * * * * * *",
            "invalid-cron",
            0,
        ),
        (
            "REPORTS__NIGHTLY__EVERY",
            "30 seconds please",
            "invalid-duration",
            0,
        ),
        ("CLEANUP__EVERY", "0s", "zero-duration", 0),
        ("CLEANUP__TIMEOUT", "soon", "timeout-invalid", 1),
        ("CLEANUP__TIMEOUT", "30d", "timeout-invalid", 2),
        ("CLEANUP__OVERLAP", "queued", "unknown-overlap", 0),
    ];
    for (variable, value, case, index) in cases {
        let variable = format!("CRONGUARD_JOB__{variable}");
        let problems = problems_of(&[(&variable, value)]).await;
        let expected = macro_messages(case)
            .get(index)
            .cloned()
            .unwrap_or_else(|| panic!("{case}.stderr has no message {index}"));
        let job = if variable.contains("NIGHTLY") {
            "reports::nightly"
        } else {
            "cleanup"
        };
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind(), ProblemKind::InvalidOverride);
        assert_eq!(problems[0].job(), Some(job));
        assert_eq!(
            problems[0].message(),
            format!("job `{job}`: environment variable `{variable}`: {expected}")
        );
    }
    // Both jobs' mistakes at once; one whose position is known with a caret under it.
    let problems = problems_of(&[
        ("CRONGUARD_JOB__REPORTS__NIGHTLY__CRON", "0 2\u{a0}* * *"),
        ("CRONGUARD_JOB__CLEANUP__JITTER", "2days"),
    ])
    .await;
    let hidden = &macro_messages("cron-hidden-whitespace")[0];
    let jitter = &macro_messages("jitter-out-of-range")[0];
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert_eq!(
        problems[0].message(),
        format!("job `cleanup`: environment variable `CRONGUARD_JOB__CLEANUP__JITTER`: {jitter}")
    );
    assert_eq!(
        problems[1].message(),
        format!("job `reports::nightly`: environment variable `CRONGUARD_JOB__REPORTS__NIGHTLY__CRON`: {hidden}\n    0 2\u{2423}* * *\n       ^")
    );
}

#[tokio::test]
async fn a_typo_fails_start_naming_what_was_meant() {
    let problems = problems_of(&[
        ("CRONGUARD_JOB__REPORTS__NIGTHLY__EVERY", "10s"),
        ("CRONGUARD_JOB__CLEANUP__LEESE", "10s"),
        ("CRONGUARD_JOB__CLEANUP__LOCK", "redis"),
        ("CRONGUARD_JOB_CLEANUP__ENABLED", "false"),
    ])
    .await;
    let messages: Vec<&str> = problems.iter().map(|p| p.message()).collect();
    assert_eq!(messages.len(), 4, "{messages:#?}");
    assert!(
        messages[0].starts_with("environment variable `CRONGUARD_JOB__CLEANUP__LEESE`: unknown key `leese`; did you mean `lease`? expected one of: `cron`, `every`,")
            && messages[0].ends_with("(the variable `CRONGUARD_JOB__CLEANUP__LEASE`)"),
        "{messages:#?}"
    );
    assert!(
        messages[1].starts_with(
            "environment variable `CRONGUARD_JOB__CLEANUP__LOCK`: `lock` cannot be overridden"
        ),
        "{messages:#?}"
    );
    assert_eq!(
        messages[2],
        "environment variable `CRONGUARD_JOB_CLEANUP__ENABLED`: does not start with `CRONGUARD_JOB__`; write `CRONGUARD_JOB__CLEANUP__ENABLED`"
    );
    assert!(
        messages[3].starts_with("environment variable `CRONGUARD_JOB__REPORTS__NIGTHLY__EVERY`: no job's name is written `REPORTS__NIGTHLY`; did you mean `CRONGUARD_JOB__REPORTS__NIGHTLY__EVERY` (job `reports::nightly`)?"),
        "{messages:#?}"
    );
    assert!(problems
        .iter()
        .all(|p| p.kind() == ProblemKind::InvalidOverride));

    let path = overrides_file("typo", "[[job]]\nname = \"cleanup\"\nenabeld = false\n");
    let (builder, _rx) = builder();
    let Err(Error::Config { problems }) = builder.overrides_file(&path).start().await else {
        panic!("an unknown key in the file");
    };
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        problems[0].message(),
        format!(
            "overrides file `{}:3`: unknown key `enabeld`; did you mean `enabled`? expected one of: `cron`, `every`, `tz`, `lock`, `lease`, `history`, `max_instances`, `overlap`, `coalesce`, `misfire_grace`, `timeout`, `retries`, `backoff`, `jitter`, `standby`, `name`, `enabled`",
            path.display()
        )
    );
    let _ = std::fs::remove_dir_all(path.parent().expect("a dir"));
}

/// Values that are valid each on their own but not for the job get `JobConfig`'s message for the
/// same settings, and the override that caused it.
#[tokio::test]
async fn a_conflict_gets_the_message_of_jobconfig() {
    let mut config = cronguard::JobConfig::new("cleanup");
    config.every = Some("10s".to_owned());
    config.backoff = Some("10s".to_owned());
    let from_config = config
        .into_job()
        .map(|_| ())
        .expect_err("backoff without retries");
    let problems = problems_of(&[("CRONGUARD_JOB__CLEANUP__BACKOFF", "10s")]).await;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind(), ProblemKind::InvalidJob);
    assert_eq!(
        problems[0].message(),
        format!(
            "{} (overridden: `backoff = \"10s\"` from environment variable `CRONGUARD_JOB__CLEANUP__BACKOFF`)",
            from_config.problems()[0]
        )
    );
}
