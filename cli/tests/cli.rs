//! The `cronguard` binary against a running scheduler that shares its store: a lock dir, a
//! real `redis-server`, and a real PostgreSQL (also one that accepts only TLS). What the tool does must reach the replica: `list` shows its job, `pause`
//! makes its next fire a paused skip, `resume` lets it run again, `trigger` runs it under the
//! printed key. `health` tells from the store alone that no replica runs a job any more, and
//! that one does again.

use std::process::Command;
use std::time::Duration;

use cronguard::{Cronguard, Event, Job, Lock, Schedule};
use cronguard_testkit::RedisServer;
use tokio::sync::broadcast::Receiver;

const CLI: &str = env!("CARGO_BIN_EXE_cronguard");

/// How long a test waits for an event the tool should cause (the feed is read every second).
const WAIT: Duration = Duration::from_secs(10);

/// What one run of the tool printed.
struct Output {
    ok: bool,
    /// The exit status.
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `cronguard <store> <args>` without the store variables of the environment.
async fn cli(store: &[String], args: &[&str]) -> Output {
    let mut cmd = Command::new(CLI);
    cmd.args(store).args(args);
    for var in [
        "CRONGUARD_REDIS_URL",
        "CRONGUARD_POSTGRES_URL",
        "CRONGUARD_LOCK_DIR",
        "CRONGUARD_POSTGRES_CA_FILE",
        "CRONGUARD_POSTGRES_CLIENT_CERT_FILE",
        "CRONGUARD_POSTGRES_CLIENT_KEY_FILE",
    ] {
        cmd.env_remove(var);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("joins")
        .expect("the binary runs");
    Output {
        ok: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

async fn ok(store: &[String], args: &[&str]) -> String {
    let out = cli(store, args).await;
    assert!(
        out.ok && out.stderr.is_empty(),
        "`cronguard {args:?}` failed: {}",
        out.stderr
    );
    out.stdout
}

async fn fails(store: &[String], args: &[&str]) -> String {
    let out = cli(store, args).await;
    assert!(!out.ok, "`cronguard {args:?}` succeeded: {}", out.stdout);
    assert!(
        !out.stderr.contains("panicked") && out.stderr.starts_with("cronguard: "),
        "{}",
        out.stderr
    );
    out.stderr
}

/// The first event that `wanted` accepts, within [`WAIT`].
async fn event(events: &mut Receiver<Event>, what: &str, wanted: impl Fn(&Event) -> bool) -> Event {
    let found = tokio::time::timeout(WAIT, async {
        loop {
            match events.recv().await {
                Ok(e) if wanted(&e) => return e,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("the scheduler's events ended: {e}"),
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("no {what} event within {WAIT:?}"))
}

fn started(e: &Event) -> bool {
    e.kind.name() == "started"
}

fn paused_skip(e: &Event) -> bool {
    matches!(e.kind, cronguard::EventKind::Skipped { paused: true, .. })
}

/// The whole round against one store: `scheduler` runs job `tick` (every second) on it.
async fn operate(store: Vec<String>, scheduler: Cronguard, keeps_history: bool) {
    let mut events = scheduler.monitor().subscribe();
    // By its first run the replica has announced its jobs.
    event(&mut events, "started", started).await;

    let list = ok(&store, &["list"]).await;
    assert!(list.starts_with("JOB"), "{list}");
    let row = list
        .lines()
        .find(|l| l.starts_with("tick "))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(
        row.contains("every 1s") && row.trim_end().ends_with('-'),
        "{row}"
    );

    let refused = fails(&store, &["pause", "tock"]).await;
    assert!(
        refused.contains("no replica announced job `tock`"),
        "{refused}"
    );

    ok(&store, &["pause", "tick", "--by", "tester"]).await;
    let skip = event(&mut events, "paused skip", paused_skip).await;
    assert_eq!(&*skip.job, "tick");
    let list = ok(&store, &["list"]).await;
    assert!(list.contains("by tester at "), "{list}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&store, &["list", "--json"]).await).expect("JSON");
    assert_eq!(json[0]["name"], "tick");
    assert_eq!(json[0]["paused"]["by"], "tester");

    ok(&store, &["resume", "tick"]).await;
    event(&mut events, "started after resume", started).await;
    let list = ok(&store, &["list"]).await;
    assert!(!list.contains("by tester"), "{list}");

    let key = ok(&store, &["trigger", "tick"]).await;
    let key = key.trim();
    assert!(
        key.starts_with("tick@manual:") && key.len() == "tick@manual:".len() + 16,
        "{key}"
    );
    let run = event(&mut events, "started of the manual run", |e| {
        started(e) && &*e.run_key == key
    })
    .await;
    assert!(run.manual.is_some());

    if keeps_history {
        event(&mut events, "end of the manual run", |e| {
            e.kind.name() == "succeeded" && &*e.run_key == key
        })
        .await;
        let history = ok(&store, &["history", "tick", "--since", "1h"]).await;
        assert!(
            history.starts_with("FIRE") && history.contains("replica-a"),
            "{history}"
        );
    } else {
        let history = fails(&store, &["history", "tick"]).await;
        assert!(history.contains("no run history"), "{history}");
    }

    scheduler.shutdown().await;
}

fn job(lock: Lock) -> Job {
    Job::new(
        "tick",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(lock)
    .run(|_| async {})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operates_the_jobs_of_a_lock_dir() {
    let dir = std::env::temp_dir().join(format!("cronguard-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let scheduler = cronguard::builder()
        .registered_jobs(false)
        .lock_dir(&dir)
        .instance("replica-a")
        .job(job(Lock::File))
        .start()
        .await
        .expect("starts");
    let store = vec!["--lock-dir".to_owned(), dir.display().to_string()];
    operate(store, scheduler, false).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operates_the_jobs_of_a_redis_server() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let scheduler = cronguard::builder()
        .registered_jobs(false)
        .redis_url(redis.url())
        .redis_prefix("cli-test")
        .instance("replica-a")
        .job(job(Lock::Redis))
        .start()
        .await
        .expect("starts");
    let store = vec![
        "--redis".to_owned(),
        redis.url(),
        "--prefix".to_owned(),
        "cli-test".to_owned(),
    ];
    operate(store, scheduler, false).await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operates_the_jobs_of_a_postgres_server() {
    let Some(postgres) = cronguard_testkit::PostgresServer::start() else {
        return;
    };
    let scheduler = cronguard::builder()
        .registered_jobs(false)
        .postgres_url(postgres.url())
        .instance("replica-a")
        .job(job(Lock::Postgres).history(true))
        .start()
        .await
        .expect("starts");
    let store = vec!["--postgres".to_owned(), postgres.url()];
    operate(store, scheduler, true).await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operates_the_jobs_of_a_postgres_server_over_tls() {
    let Some(postgres) = cronguard_testkit::PostgresTls::start(cronguard_testkit::ClientAuth::No)
    else {
        return;
    };
    let url = postgres.url("verify-full");
    let scheduler = cronguard::builder()
        .registered_jobs(false)
        .postgres_url(&url)
        .postgres_tls_ca(postgres.ca_file())
        .instance("replica-a")
        .job(job(Lock::Postgres).history(true))
        .start()
        .await
        .expect("starts over TLS");
    // The CA as the URL's `sslrootcert`.
    let with_ca = format!("{url}&sslrootcert={}", postgres.ca_file().display());
    operate(vec!["--postgres".to_owned(), with_ca], scheduler, true).await;

    let untrusted = fails(&["--postgres".to_owned(), url.clone()], &["list"]).await;
    assert!(untrusted.contains("not trusted"), "{untrusted}");
    assert!(
        untrusted.contains("CRONGUARD_POSTGRES_CA_FILE"),
        "{untrusted}"
    );
    // The CA as the replicas read it from the environment.
    let mut cmd = Command::new(CLI);
    cmd.args(["--postgres", &url, "list"])
        .env_remove("CRONGUARD_POSTGRES_URL")
        .env("CRONGUARD_POSTGRES_CA_FILE", postgres.ca_file());
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("joins")
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("tick "),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Where the replicas of the dead-man check keep their state.
enum Shared {
    LockDir(std::path::PathBuf),
    Redis(String),
    Postgres(String),
}

impl Shared {
    /// The tool's flags for this store.
    fn flags(&self) -> Vec<String> {
        match self {
            Shared::LockDir(dir) => vec!["--lock-dir".to_owned(), dir.display().to_string()],
            Shared::Redis(url) => vec![
                "--redis".to_owned(),
                url.clone(),
                "--prefix".to_owned(),
                "cli-health".to_owned(),
            ],
            Shared::Postgres(url) => vec!["--postgres".to_owned(), url.clone()],
        }
    }

    /// A replica that runs job `beat`: every second, with a grace of a second.
    async fn replica(&self) -> Cronguard {
        let builder = cronguard::builder()
            .registered_jobs(false)
            .instance("replica-a");
        let (builder, lock) = match self {
            Shared::LockDir(dir) => (builder.lock_dir(dir), Lock::File),
            Shared::Redis(url) => (
                builder.redis_url(url).redis_prefix("cli-health"),
                Lock::Redis,
            ),
            Shared::Postgres(url) => (builder.postgres_url(url), Lock::Postgres),
        };
        let beat = Job::new(
            "beat",
            Schedule::every(Duration::from_secs(1)).expect("valid"),
        )
        .lock(lock)
        .misfire_grace(Duration::from_secs(1))
        .run(|_| async {});
        builder.job(beat).start().await.expect("starts")
    }
}

/// Runs `cronguard health` until it exits with `code`, within [`WAIT`]; returns that run.
async fn health_until(store: &[String], code: i32, what: &str) -> Output {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let out = cli(store, &["health"]).await;
        if out.code == Some(code) {
            return out;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "`cronguard health` did not exit with {code} ({what}) within {WAIT:?}; last exit {:?}:\n{}{}",
            out.code,
            out.stdout,
            out.stderr
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The row of job `beat` in a health table.
fn beat_row(table: &str) -> &str {
    table
        .lines()
        .find(|l| l.starts_with("beat "))
        .unwrap_or_else(|| panic!("no row of `beat`:\n{table}"))
}

/// The dead-man check: a replica runs `beat`, stops, and `health` names the job once a fire's
/// grace passed with no process; a replica starts again, and once a fire ran it exits with 0.
async fn dead_man(shared: Shared) {
    let store = shared.flags();
    let replica = shared.replica().await;
    let mut events = replica.monitor().subscribe();
    event(&mut events, "started", started).await;
    let fine = health_until(&store, 0, "a replica runs the job").await;
    assert!(fine.stdout.starts_with("JOB"), "{}", fine.stdout);
    assert!(
        beat_row(&fine.stdout).contains("on time"),
        "{}",
        fine.stdout
    );
    replica.shutdown().await;

    let missed = health_until(&store, 1, "no process runs the job").await;
    assert!(
        beat_row(&missed.stdout).contains(" missed "),
        "{}",
        missed.stdout
    );
    assert!(
        missed.stderr.starts_with("cronguard: ")
            && missed.stderr.contains("`beat`")
            && missed.stderr.contains("missed"),
        "{}",
        missed.stderr
    );
    let json = cli(&store, &["health", "--json"]).await;
    assert_eq!(json.code, Some(1), "{}", json.stderr);
    let json: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(json["healthy"], false);
    assert_eq!(json["jobs"][0]["name"], "beat");
    assert_eq!(json["jobs"][0]["state"], "missed");
    assert_eq!(json["jobs"][0]["due_grace"]["secs"], 1, "{json}");
    assert!(json["jobs"][0]["due"].is_string(), "{json}");

    let replica = shared.replica().await;
    let again = health_until(&store, 0, "a replica runs the job again").await;
    assert!(
        beat_row(&again.stdout).contains("on time"),
        "{}",
        again.stdout
    );
    replica.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_tells_when_no_replica_runs_a_job_of_a_lock_dir() {
    let dir = std::env::temp_dir().join(format!("cronguard-cli-health-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dead_man(Shared::LockDir(dir.clone())).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_tells_when_no_replica_runs_a_job_of_a_redis_server() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    dead_man(Shared::Redis(redis.url())).await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_tells_when_no_replica_runs_a_job_of_a_postgres_server() {
    let Some(postgres) = cronguard_testkit::PostgresServer::start() else {
        return;
    };
    dead_man(Shared::Postgres(postgres.url())).await;
}

/// A replica runs `stuck`, whose first run never ends: its next fires are skipped as busy, so
/// they have a fate in the store but did not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_tells_fires_dropped_without_running_in_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let store = vec!["--redis".to_owned(), redis.url()];
    let stuck = Job::new(
        "stuck",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::Redis)
    .overlap(cronguard::Overlap::Skip)
    .misfire_grace(Duration::from_secs(1))
    .run(|ctx| async move { ctx.cancelled().await });
    let replica = cronguard::builder()
        .registered_jobs(false)
        .redis_url(redis.url())
        .instance("replica-a")
        .shutdown_timeout(Duration::from_millis(100))
        .job(stuck)
        .start()
        .await
        .expect("starts");
    let overdue = health_until(&store, 1, "fires skipped as busy").await;
    let row = overdue
        .stdout
        .lines()
        .find(|l| l.starts_with("stuck "))
        .unwrap_or_else(|| panic!("{}", overdue.stdout));
    assert!(row.contains(" overdue "), "{}", overdue.stdout);
    assert!(
        overdue.stderr.contains("`stuck`") && overdue.stderr.contains("overdue"),
        "{}",
        overdue.stderr
    );
    replica.shutdown().await;
}

#[tokio::test]
async fn health_that_cannot_check_exits_with_2() {
    let down = cli(
        &[
            "--redis".into(),
            format!("redis://127.0.0.1:{}", cronguard_testkit::free_port()),
        ],
        &["health"],
    )
    .await;
    assert_eq!(down.code, Some(2), "{}", down.stderr);
    assert!(down.stderr.contains("cannot be reached"), "{}", down.stderr);
    let none = cli(&[], &["health"]).await;
    assert_eq!(none.code, Some(2), "{}", none.stderr);
    let dir = std::env::temp_dir().join(format!("cronguard-cli-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let empty = cli(
        &["--lock-dir".into(), dir.display().to_string()],
        &["health"],
    )
    .await;
    assert_eq!(empty.code, Some(2), "{}", empty.stderr);
    assert!(
        empty.stderr.contains("nothing to check"),
        "{}",
        empty.stderr
    );
    let wrong = cli(
        &["--lock-dir".into(), dir.display().to_string()],
        &["health", "--bogus"],
    )
    .await;
    assert_eq!(wrong.code, Some(2), "{}", wrong.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_store_must_be_named_once() {
    let none = fails(&[], &["list"]).await;
    assert!(none.contains("no store given"), "{none}");
    let two = fails(
        &[
            "--lock-dir".into(),
            "/tmp".into(),
            "--redis".into(),
            "redis://127.0.0.1:1".into(),
        ],
        &["list"],
    )
    .await;
    assert!(two.contains("several stores given"), "{two}");
    let missing = fails(
        &["--lock-dir".into(), "/nonexistent/cronguard".into()],
        &["list"],
    )
    .await;
    assert!(missing.contains("cannot use the lock dir"), "{missing}");
    let down = fails(
        &[
            "--redis".into(),
            format!("redis://127.0.0.1:{}", cronguard_testkit::free_port()),
        ],
        &["list"],
    )
    .await;
    assert!(down.contains("cannot be reached"), "{down}");
}
