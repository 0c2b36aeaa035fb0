//! The `cronguard` binary against a running scheduler that shares its store: a lock dir, a real
//! `redis-server` (also one that speaks only TLS, with a private CA), a real PostgreSQL (also one that accepts only TLS). What the
//! tool does must reach the replica: `list` shows its job, `pause` makes its next fire a paused
//! skip, `resume` lets it run again, `trigger` runs it under the printed key — and is refused
//! when no live replica runs the job. `health` tells from the store alone that no replica runs a
//! job any more, and that one does again. The tool reads the replicas' environment, never needs
//! a password on its command line, escapes what the store holds before a terminal sees it, and
//! says what happened in its exit status.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cronguard::{Cronguard, Event, Job, Lock, Schedule};
use cronguard_testkit::RedisServer;
use tokio::sync::broadcast::Receiver;

const CLI: &str = env!("CARGO_BIN_EXE_cronguard");

/// How long a test waits for an event the tool should cause (the feed is read every second).
const WAIT: Duration = Duration::from_secs(10);

/// How long a stopped replica may stay present at its store (5 s), and a margin.
const GONE: Duration = Duration::from_secs(15);

/// The misfire grace of the jobs that the tests run now: a run asked for must start within it,
/// also on a busy machine (the replicas read the request up to a second after it was made).
const RUN_GRACE: Duration = Duration::from_secs(30);

/// Every variable of the store's settings that the tool reads; `--help` lists each, and the
/// tests run the tool without the values the test process may have.
const STORE_VARS: &[&str] = &[
    "CRONGUARD_REDIS_URL",
    "CRONGUARD_REDIS_URL_FILE",
    "REDIS_URL",
    "CRONGUARD_REDIS_PREFIX",
    "CRONGUARD_REDIS_CA_FILE",
    "CRONGUARD_REDIS_CLIENT_CERT_FILE",
    "CRONGUARD_REDIS_CLIENT_KEY_FILE",
    "CRONGUARD_POSTGRES_URL",
    "CRONGUARD_POSTGRES_URL_FILE",
    "DATABASE_URL",
    "CRONGUARD_POSTGRES_CA_FILE",
    "CRONGUARD_POSTGRES_CLIENT_CERT_FILE",
    "CRONGUARD_POSTGRES_CLIENT_KEY_FILE",
    "CRONGUARD_POSTGRES_POOL_SIZE",
    "CRONGUARD_POSTGRES_SCHEMA",
    "CRONGUARD_LOCK_DIR",
];

/// The variables of `cronguard dashboard`'s tokens; `--help` lists each.
const DASHBOARD_VARS: &[&str] = &[
    "CRONGUARD_DASHBOARD_TOKEN",
    "CRONGUARD_DASHBOARD_TOKEN_FILE",
    "CRONGUARD_DASHBOARD_READ_TOKEN",
    "CRONGUARD_DASHBOARD_READ_TOKEN_FILE",
];

/// What one run of the tool printed.
#[derive(Debug)]
struct Output {
    ok: bool,
    /// The exit status.
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `cronguard <store> <args>` with `env` and none of [`STORE_VARS`] of the test process.
async fn cli_env(store: &[String], args: &[&str], env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new(CLI);
    cmd.args(store).args(args);
    for var in STORE_VARS.iter().chain(DASHBOARD_VARS) {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
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

/// Runs `cronguard <store> <args>` without the store variables of the environment.
async fn cli(store: &[String], args: &[&str]) -> Output {
    cli_env(store, args, &[]).await
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

/// Runs the tool, which must exit with `code` and say why on stderr.
async fn fails_with(store: &[String], args: &[&str], code: i32) -> String {
    let out = cli(store, args).await;
    assert_eq!(
        out.code,
        Some(code),
        "`cronguard {args:?}`: {}{}",
        out.stdout,
        out.stderr
    );
    assert!(
        !out.stderr.contains("panicked") && out.stderr.starts_with("cronguard: "),
        "{}",
        out.stderr
    );
    out.stderr
}

/// Runs `cronguard <store> <args>` until it exits with `code`, within `within`; returns that run.
async fn until(store: &[String], args: &[&str], code: i32, within: Duration, what: &str) -> Output {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let out = cli(store, args).await;
        if out.code == Some(code) {
            return out;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "`cronguard {args:?}` did not exit with {code} ({what}) within {within:?}; last exit {:?}:\n{}{}",
            out.code,
            out.stdout,
            out.stderr
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until no process of `instance` is present at the store: a replica that stopped stays
/// present for up to 5 s.
async fn until_gone(store: &[String], instance: &str) {
    let deadline = tokio::time::Instant::now() + GONE;
    loop {
        let out = cli(store, &["processes", "--json"]).await;
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
        let present = json.as_array().is_some_and(|all| {
            all.iter()
                .any(|p| p["instance"] == instance && p["present"] == true)
        });
        if !present {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "`{instance}` still present after {GONE:?}: {json}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
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

/// A scratch folder private to this user, as a lock dir must be.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cronguard-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(&dir).expect("scratch dir");
    dir
}

/// The whole round against one store: `scheduler` runs job `tick` (every second) on it.
async fn operate(store: Vec<String>, scheduler: Cronguard) {
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

    let refused = fails_with(&store, &["pause", "tock"], 4).await;
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
    assert_eq!(json[0]["schedule"], "every 1s");
    assert_eq!(json[0]["announced_by"], "replica-a");
    for field in ["next_fire", "last_claimed", "announced_at"] {
        assert!(json[0][field].is_string(), "{field}: {json}");
    }

    ok(&store, &["resume", "tick"]).await;
    event(&mut events, "started after resume", started).await;
    let list = ok(&store, &["list"]).await;
    assert!(!list.contains("by tester"), "{list}");

    let processes = ok(&store, &["processes"]).await;
    assert!(
        processes.starts_with("INSTANCE") && processes.contains("replica-a"),
        "{processes}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&store, &["processes", "--json"]).await).expect("JSON");
    assert_eq!(json[0]["instance"], "replica-a", "{json}");
    assert_eq!(json[0]["pid"], std::process::id(), "{json}");
    assert_eq!(json[0]["present"], true, "{json}");

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

    event(&mut events, "end of the manual run", |e| {
        e.kind.name() == "succeeded" && &*e.run_key == key
    })
    .await;
    // The end is written to the store right after the event.
    cronguard_testkit::eventually(
        "the end of the run in the history",
        Duration::from_secs(10),
        || {
            let store = store.clone();
            async move {
                ok(&store, &["history", "tick", "--since", "1h"])
                    .await
                    .contains("succeeded")
            }
        },
    )
    .await;
    let history = ok(&store, &["history", "tick", "--since", "1h"]).await;
    assert!(
        history.starts_with("FIRE") && history.contains("replica-a"),
        "{history}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&store, &["history", "tick", "--json"]).await).expect("JSON");
    let entry = json
        .as_array()
        .and_then(|all| all.iter().find(|e| e["outcome"] == "succeeded"))
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(entry["job"], "tick");
    assert_eq!(entry["instance"], "replica-a");
    for field in ["fire_time", "started", "ended"] {
        assert!(entry[field].is_string(), "{field}: {entry}");
    }
    assert!(entry["fencing_token"].is_u64(), "{entry}");

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
    let dir = scratch("operate");
    let scheduler = cronguard::builder()
        .registered_jobs(false)
        .lock_dir(&dir)
        .instance("replica-a")
        .job(job(Lock::File))
        .start()
        .await
        .expect("starts");
    let store = vec!["--lock-dir".to_owned(), dir.display().to_string()];
    operate(store, scheduler).await;
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
    operate(store, scheduler).await;
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
    operate(store, scheduler).await;
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
    operate(vec!["--postgres".to_owned(), with_ca], scheduler).await;

    let untrusted = fails_with(&["--postgres".to_owned(), url.clone()], &["list"], 3).await;
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
    LockDir(PathBuf),
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

    /// A replica of `instance` that runs job `job` every second, with a misfire grace of `grace`.
    async fn replica_of(&self, instance: &str, job: &str, grace: Duration) -> Cronguard {
        let builder = cronguard::builder()
            .registered_jobs(false)
            .instance(instance);
        let (builder, lock) = match self {
            Shared::LockDir(dir) => (builder.lock_dir(dir), Lock::File),
            Shared::Redis(url) => (
                builder.redis_url(url).redis_prefix("cli-health"),
                Lock::Redis,
            ),
            Shared::Postgres(url) => (builder.postgres_url(url), Lock::Postgres),
        };
        let job = Job::new(job, Schedule::every(Duration::from_secs(1)).expect("valid"))
            .lock(lock)
            .misfire_grace(grace)
            .run(|_| async {});
        builder.job(job).start().await.expect("starts")
    }

    /// A replica `replica-a` that runs job `beat`, with a grace of a second.
    async fn replica(&self) -> Cronguard {
        self.replica_of("replica-a", "beat", Duration::from_secs(1))
            .await
    }
}

/// Runs `cronguard health` until it exits with `code`, within [`WAIT`]; returns that run.
async fn health_until(store: &[String], code: i32, what: &str) -> Output {
    until(store, &["health"], code, WAIT, what).await
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
    assert!(json["checked_at"].is_string(), "{json}");
    assert_eq!(json["jobs"][0]["name"], "beat");
    assert_eq!(json["jobs"][0]["state"], "missed");
    assert_eq!(json["jobs"][0]["due_grace"]["secs"], 1, "{json}");
    assert!(json["jobs"][0]["due"].is_string(), "{json}");
    assert_eq!(json["jobs"][0]["announced_by"], "replica-a", "{json}");

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
    let dir = scratch("health");
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

/// `trigger` asks for a run only when a live replica runs the job: refused (4, with what the
/// store shows) once the replica that announced it stopped; `--force` asks anyway and says so;
/// an unknown job is refused; a replica of another instance that starts is live once it has
/// announced the job, and then the run asked for happens there.
async fn trigger_needs_a_live_replica(shared: Shared) {
    let store = shared.flags();
    let replica = shared.replica_of("replica-a", "beat", RUN_GRACE).await;
    let mut events = replica.monitor().subscribe();
    event(&mut events, "started", started).await;
    replica.shutdown().await;
    until_gone(&store, "replica-a").await;

    let refused = cli(&store, &["trigger", "beat"]).await;
    assert_eq!(refused.code, Some(4), "{}", refused.stderr);
    assert!(refused.stdout.is_empty(), "{}", refused.stdout);
    assert!(
        refused.stderr.starts_with(
            "cronguard: no live replica runs job `beat`: no process has attended this store for "
        ) && refused.stderr.contains("(the last was `replica-a` pid ")
            && refused.stderr.contains("start a replica that runs the job")
            && refused.stderr.contains("--force"),
        "{}",
        refused.stderr
    );

    let unknown = fails_with(&store, &["trigger", "nope"], 4).await;
    assert!(
        unknown.contains("no replica announced job `nope`"),
        "{unknown}"
    );

    let forced = cli(&store, &["trigger", "beat", "--force"]).await;
    assert_eq!(forced.code, Some(0), "{}", forced.stderr);
    assert!(
        forced.stdout.starts_with("beat@manual:"),
        "{}",
        forced.stdout
    );
    assert!(
        forced
            .stderr
            .starts_with("cronguard: warning: the store shows no live replica of job `beat`"),
        "{}",
        forced.stderr
    );

    let replica = shared.replica_of("replica-b", "beat", RUN_GRACE).await;
    let mut events = replica.monitor().subscribe();
    let accepted = until(
        &store,
        &["trigger", "beat"],
        0,
        WAIT,
        "a replica runs the job again",
    )
    .await;
    assert!(accepted.stderr.is_empty(), "{}", accepted.stderr);
    let key = accepted.stdout.trim().to_owned();
    let run = event(&mut events, "started of the run asked for", |e| {
        started(e) && *e.run_key == *key
    })
    .await;
    assert!(run.manual.is_some());
    replica.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_needs_a_live_replica_of_a_redis_server() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    trigger_needs_a_live_replica(Shared::Redis(redis.url())).await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_needs_a_live_replica_of_a_postgres_server() {
    let Some(postgres) = cronguard_testkit::PostgresServer::start() else {
        return;
    };
    trigger_needs_a_live_replica(Shared::Postgres(postgres.url())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_needs_a_live_replica_of_a_lock_dir() {
    let dir = scratch("trigger");
    trigger_needs_a_live_replica(Shared::LockDir(dir.clone())).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Processes are present, but none of the instance that announced the job: the store cannot
/// tell that one of them runs it, and the refusal names them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_is_refused_when_only_other_instances_are_present() {
    let dir = scratch("others");
    let shared = Shared::LockDir(dir.clone());
    let store = shared.flags();
    let a = shared.replica_of("replica-a", "beat", RUN_GRACE).await;
    let mut events = a.monitor().subscribe();
    event(&mut events, "started", started).await;
    let b = shared.replica_of("replica-b", "other", RUN_GRACE).await;
    let mut events = b.monitor().subscribe();
    event(&mut events, "started", started).await;
    ok(&store, &["trigger", "beat"]).await;
    a.shutdown().await;
    until_gone(&store, "replica-a").await;
    let refused = cli(&store, &["trigger", "beat"]).await;
    assert_eq!(refused.code, Some(4), "{}", refused.stderr);
    assert!(
        refused.stderr.contains(
            "no live replica is known to run job `beat`: `replica-a`, which announced it last"
        ) && refused
            .stderr
            .contains("1 other process is present (`replica-b` pid ")
            && refused.stderr.contains("--force"),
        "{}",
        refused.stderr
    );
    b.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
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

/// A redis URL nothing listens on.
fn down_redis() -> Vec<String> {
    vec![
        "--redis".into(),
        format!("redis://127.0.0.1:{}", cronguard_testkit::free_port()),
    ]
}

/// Writes the roster entry of a job as a `file` replica would (`<job>.roster` in the lock dir),
/// with any text in it: the store is not trusted to hold only what cronguard writes.
fn forge_roster(dir: &Path, file: &str, job: &str, schedule: &str, instance: &str, ago_ms: i64) {
    let encode = |s: &str| {
        s.replace('%', "%25")
            .replace('\t', "%09")
            .replace('\n', "%0A")
            .replace('\r', "%0D")
    };
    let at = chrono::Utc::now().timestamp_millis() - ago_ms;
    let line = format!(
        "{}\t{}\t{}\t{at}\t1000\n",
        encode(job),
        encode(schedule),
        encode(instance)
    );
    std::fs::write(dir.join(format!("{file}.roster")), line).expect("writes a roster entry");
}

/// Lists a process as present at the lock dir, with any id.
fn forge_process(dir: &Path, id: &str) {
    let processes = dir.join(".cronguard-processes");
    std::fs::create_dir_all(&processes).expect("processes dir");
    std::fs::write(processes.join("00000000000000ff"), id).expect("writes a process");
}

/// One test per exit status that `--help` documents.
#[tokio::test]
async fn every_documented_exit_status() {
    let dir = scratch("exit");
    let store = vec!["--lock-dir".to_owned(), dir.display().to_string()];

    // 4: nothing to check; an unknown job.
    let empty = cli(&store, &["health"]).await;
    assert_eq!(empty.code, Some(4), "{}", empty.stderr);
    assert!(
        empty.stderr.contains("nothing to check"),
        "{}",
        empty.stderr
    );
    let unknown = fails_with(&store, &["trigger", "nope"], 4).await;
    assert!(
        unknown.contains("no replica announced job `nope`"),
        "{unknown}"
    );

    // 1: a job announced 10 s ago, due every second, whose fires nobody claimed.
    forge_roster(&dir, "lonely", "lonely", "every 1s", "gone", 10_000);
    let missed = cli(&store, &["health"]).await;
    assert_eq!(missed.code, Some(1), "{}{}", missed.stdout, missed.stderr);
    assert!(missed.stderr.contains("`lonely`"), "{}", missed.stderr);

    // 0: done.
    let list = cli(&store, &["list"]).await;
    assert_eq!(list.code, Some(0), "{}", list.stderr);
    assert!(list.stdout.contains("lonely"), "{}", list.stdout);

    // 2: the command line or the settings are wrong (also for `health`).
    for (args, why) in [
        (vec!["health", "--bogus"], "unexpected argument"),
        (vec!["list", "--store", "floppy"], "invalid value"),
        (
            vec!["history", "lonely", "--since", "yesterday"],
            "neither an RFC 3339 time",
        ),
        (
            vec!["list", "--schema", "s"],
            "--schema applies to a PostgreSQL store",
        ),
    ] {
        let out = cli(&store, &args).await;
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(why), "{args:?}: {}", out.stderr);
    }
    let none = fails_with(&[], &["health"], 2).await;
    assert!(none.contains("no store given"), "{none}");

    // 3: the store cannot be used.
    let down = fails_with(&down_redis(), &["health"], 3).await;
    assert!(down.contains("cannot be reached"), "{down}");
    let down = fails_with(&down_redis(), &["trigger", "x"], 3).await;
    assert!(down.contains("cannot be reached"), "{down}");

    let help = cli(&[], &["--help"]).await;
    assert_eq!(help.code, Some(0), "{}", help.stderr);
    for code in 0..=4 {
        assert!(
            help.stdout.contains(&format!("\n  {code}  ")),
            "exit status {code} is not documented:\n{}",
            help.stdout
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn help_lists_every_variable_the_tool_reads() {
    let help = cli(&[], &["--help"]).await;
    assert_eq!(help.code, Some(0), "{}", help.stderr);
    for var in STORE_VARS
        .iter()
        .chain(DASHBOARD_VARS)
        .chain(&["USER", "LOGNAME"])
    {
        assert!(
            help.stdout.contains(var),
            "`{var}` is not in --help:\n{}",
            help.stdout
        );
    }
    let short = cli(&[], &["-h"]).await;
    assert!(
        short.stdout.contains("CRONGUARD_REDIS_URL_FILE"),
        "{}",
        short.stdout
    );
}

#[tokio::test]
async fn a_store_must_be_named_once() {
    let none = fails_with(&[], &["list"], 2).await;
    assert!(none.contains("no store given"), "{none}");
    let two = fails_with(
        &[
            "--lock-dir".into(),
            "/tmp".into(),
            "--redis".into(),
            "redis://127.0.0.1:1".into(),
        ],
        &["list"],
        2,
    )
    .await;
    assert!(two.contains("several stores given"), "{two}");
    let missing = fails_with(
        &["--lock-dir".into(), "/nonexistent/cronguard".into()],
        &["list"],
        3,
    )
    .await;
    assert!(missing.contains("cannot use the lock dir"), "{missing}");
    let down = fails_with(&down_redis(), &["list"], 3).await;
    assert!(down.contains("cannot be reached"), "{down}");
    let env = [
        ("REDIS_URL", "redis://127.0.0.1:1".to_owned()),
        ("DATABASE_URL", "postgres://127.0.0.1:1/db".to_owned()),
    ];
    let both = cli_env(&[], &["list"], &env).await;
    assert_eq!(both.code, Some(2), "{}", both.stderr);
    assert!(
        both.stderr
            .contains("several stores given by the environment (REDIS_URL, DATABASE_URL)")
            && both.stderr.contains("--store"),
        "{}",
        both.stderr
    );
}

/// The tool reads the replicas' variables: the generic `REDIS_URL` and `DATABASE_URL`, a URL in a
/// file (`_FILE`, or a flag) with its trailing newline, the prefix and the schema; a variable and
/// its `_FILE` twin together are an error.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_the_environment_of_the_replicas() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let Some(postgres) = cronguard_testkit::PostgresServer::start() else {
        return;
    };
    let dir = scratch("env");
    let redis_job = Job::new(
        "in-redis",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::Redis)
    .run(|_| async {});
    let postgres_job = Job::new(
        "in-postgres",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::Postgres)
    .run(|_| async {});
    let replica = cronguard::builder()
        .registered_jobs(false)
        .redis_url(redis.url())
        .redis_prefix("env-prefix")
        .postgres_url(postgres.url())
        .postgres_schema("env_schema")
        .instance("replica-a")
        .job(redis_job)
        .job(postgres_job)
        .start()
        .await
        .expect("starts");
    let mut events = replica.monitor().subscribe();
    event(&mut events, "started", started).await;
    event(&mut events, "started", started).await;

    let lists = |out: &Output, job: &str| {
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        assert!(out.stdout.contains(job), "{}", out.stdout);
    };
    let prefix = ("CRONGUARD_REDIS_PREFIX", "env-prefix".to_owned());
    let schema = ("CRONGUARD_POSTGRES_SCHEMA", "env_schema".to_owned());
    lists(
        &cli_env(
            &[],
            &["list"],
            &[("REDIS_URL", redis.url()), prefix.clone()],
        )
        .await,
        "in-redis",
    );
    lists(
        &cli_env(
            &[],
            &["list"],
            &[("DATABASE_URL", postgres.url()), schema.clone()],
        )
        .await,
        "in-postgres",
    );
    // The replicas' own variables win over the generic ones, of either kind.
    lists(
        &cli_env(
            &[],
            &["list"],
            &[
                ("CRONGUARD_REDIS_URL", redis.url()),
                ("DATABASE_URL", "postgres://127.0.0.1:1/app".to_owned()),
                prefix.clone(),
            ],
        )
        .await,
        "in-redis",
    );
    // Both own variables: `--store` picks one.
    lists(
        &cli_env(
            &["--store".to_owned(), "postgres".to_owned()],
            &["list"],
            &[
                ("CRONGUARD_REDIS_URL", redis.url()),
                ("CRONGUARD_POSTGRES_URL", postgres.url()),
                schema.clone(),
            ],
        )
        .await,
        "in-postgres",
    );

    let redis_file = dir.join("redis-url");
    std::fs::write(&redis_file, format!("{}\n", redis.url())).expect("writes");
    let postgres_file = dir.join("postgres-url");
    std::fs::write(&postgres_file, format!("  {}\r\n", postgres.url())).expect("writes");
    lists(
        &cli_env(
            &[],
            &["list"],
            &[
                ("CRONGUARD_REDIS_URL_FILE", redis_file.display().to_string()),
                prefix.clone(),
            ],
        )
        .await,
        "in-redis",
    );
    lists(
        &cli_env(
            &[
                "--postgres-url-file".to_owned(),
                postgres_file.display().to_string(),
            ],
            &["list"],
            std::slice::from_ref(&schema),
        )
        .await,
        "in-postgres",
    );
    let twins = cli_env(
        &[],
        &["list"],
        &[
            ("CRONGUARD_REDIS_URL", redis.url()),
            ("CRONGUARD_REDIS_URL_FILE", redis_file.display().to_string()),
        ],
    )
    .await;
    assert_eq!(twins.code, Some(2), "{}", twins.stderr);
    assert!(
        twins
            .stderr
            .contains("both `CRONGUARD_REDIS_URL` and `CRONGUARD_REDIS_URL_FILE` are set"),
        "{}",
        twins.stderr
    );
    let unreadable = cli_env(
        &[
            "--redis-url-file".to_owned(),
            dir.join("missing").display().to_string(),
        ],
        &["list"],
        &[],
    )
    .await;
    assert_eq!(unreadable.code, Some(2), "{}", unreadable.stderr);
    assert!(
        unreadable.stderr.contains("cannot read the URL file"),
        "{}",
        unreadable.stderr
    );

    // A password on the command line is said to be visible, and not repeated.
    let with_password = postgres.url().replace("postgres@", "postgres:hunter2@");
    let warned = cli_env(
        &["--postgres".to_owned(), with_password],
        &["list"],
        std::slice::from_ref(&schema),
    )
    .await;
    assert_eq!(warned.code, Some(0), "{}", warned.stderr);
    assert!(warned.stdout.contains("in-postgres"), "{}", warned.stdout);
    assert!(
        warned.stderr.starts_with("cronguard: warning: the URL given with --postgres holds a password, which every user of this host can read in the process list; give it with --postgres-url-file PATH, `CRONGUARD_POSTGRES_URL_FILE` or `CRONGUARD_POSTGRES_URL` instead")
            && !warned.stderr.contains("hunter2"),
        "{}",
        warned.stderr
    );
    replica.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rediss://` to a server of a private CA that requires client certificates: the tool trusts
/// the CA and shows the certificate given by the replicas' variables or by its flags, and says
/// what is missing otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operates_a_redis_server_over_tls_with_a_private_ca() {
    use cronguard_testkit::{ClientAuth, RedisTls};
    let Some(server) = RedisTls::start(ClientAuth::Required) else {
        return;
    };
    let replica = cronguard::builder()
        .registered_jobs(false)
        .redis_url(server.url())
        .redis_tls_ca(server.ca_file())
        .redis_tls_client_cert(server.client_cert(), server.client_key())
        .instance("replica-a")
        .job(job(Lock::Redis))
        .start()
        .await
        .expect("starts");
    let mut events = replica.monitor().subscribe();
    event(&mut events, "started", started).await;

    let path = |p: PathBuf| p.display().to_string();
    let by_env = cli_env(
        &[],
        &["list"],
        &[
            ("CRONGUARD_REDIS_URL", server.url()),
            ("CRONGUARD_REDIS_CA_FILE", path(server.ca_file())),
            (
                "CRONGUARD_REDIS_CLIENT_CERT_FILE",
                path(server.client_cert()),
            ),
            ("CRONGUARD_REDIS_CLIENT_KEY_FILE", path(server.client_key())),
        ],
    )
    .await;
    assert_eq!(by_env.code, Some(0), "{}", by_env.stderr);
    assert!(by_env.stdout.contains("tick "), "{}", by_env.stdout);

    let flags = vec![
        "--redis".to_owned(),
        server.url(),
        "--redis-ca-file".to_owned(),
        path(server.ca_file()),
        "--redis-client-cert-file".to_owned(),
        path(server.client_cert()),
        "--redis-client-key-file".to_owned(),
        path(server.client_key()),
    ];
    let key = ok(&flags, &["trigger", "tick"]).await;
    let key = key.trim().to_owned();
    event(&mut events, "started of the run asked for", |e| {
        started(e) && *e.run_key == *key
    })
    .await;

    let untrusted = fails_with(&["--redis".to_owned(), server.url()], &["list"], 3).await;
    assert!(
        untrusted.contains("not trusted") && untrusted.contains("CRONGUARD_REDIS_CA_FILE"),
        "{untrusted}"
    );
    let no_cert = fails_with(&flags[..4], &["list"], 3).await;
    assert!(
        no_cert.contains("CRONGUARD_REDIS_CLIENT_CERT_FILE"),
        "{no_cert}"
    );
    let half = fails_with(&flags[..6], &["list"], 2).await;
    assert!(half.contains("not its key"), "{half}");
    replica.shutdown().await;
}

/// Whether `text` holds a character a terminal could act on, other than the line breaks that
/// end its lines.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| *c != '\n' && (c.is_control() || ('\u{202a}'..='\u{202e}').contains(c)))
        .collect()
}

/// Job names, schedules, instances, operators and reasons holding ESC, CR, line breaks, BEL, a C1
/// control and a bidirectional override reach the terminal escaped, in tables, messages and JSON.
#[cfg(unix)]
#[tokio::test]
async fn texts_from_the_store_reach_the_terminal_escaped() {
    let dir = scratch("escape");
    let store = vec!["--lock-dir".to_owned(), dir.display().to_string()];
    let evil = "evil\u{1b}[31m\r\nname\u{9b}2J\u{202e}";
    forge_roster(
        &dir,
        "evil",
        evil,
        "every 1s",
        "inst\u{7}\u{1b}]0;pwned\u{7}",
        0,
    );
    forge_roster(&dir, "odd", "odd", "every \u{1b}[2J soon", "inst", 0);
    forge_process(&dir, "spoof\u{1b}[5m\nline 1 0000000000000001");

    let mut outputs = Vec::new();
    let paused = cli(&store, &["pause", evil, "--by", "op\u{1b}[2J\r\nx"]).await;
    assert_eq!(paused.code, Some(0), "{}", paused.stderr);
    outputs.push(paused);
    for args in [
        &["list"][..],
        &["list", "--json"],
        &["health"],
        &["health", "--json"],
        &["processes"],
        &["processes", "--json"],
        &["trigger", evil],
        &["history", evil],
    ] {
        outputs.push(cli(&store, args).await);
    }
    for out in &outputs {
        assert!(
            raw_controls(&out.stdout).is_empty() && raw_controls(&out.stderr).is_empty(),
            "raw control characters: {out:?}"
        );
    }
    let list = &outputs[1].stdout;
    assert_eq!(list.lines().count(), 3, "one line per job:\n{list}");
    assert!(
        list.contains("evil\\u{1b}[31m\\r\\nname\\u{9b}2J\\u{202e}")
            && list.contains("by op")
            && list.contains("every \\u{1b}[2J soon"),
        "{list}"
    );
    let json: serde_json::Value = serde_json::from_str(&outputs[2].stdout).expect("JSON");
    assert_eq!(json[0]["name"], evil, "JSON keeps the text, escaped");
    assert!(
        outputs[2].stdout.contains("\\u009b"),
        "{}",
        outputs[2].stdout
    );
    let health = &outputs[3];
    assert!(
        health.stdout.contains("unknown") && health.stdout.contains("every \\u{1b}[2J soon"),
        "{}",
        health.stdout
    );
    let trigger = &outputs[7];
    assert_eq!(trigger.code, Some(4), "{}", trigger.stderr);
    assert!(
        trigger.stderr.contains("`inst\\u{7}\\u{1b}]0;pwned\\u{7}`")
            && trigger.stderr.contains("`spoof\\u{1b}[5m\\nline` pid 1"),
        "{}",
        trigger.stderr
    );
    assert_eq!(trigger.stderr.lines().count(), 1, "{}", trigger.stderr);
    // The lock dir keeps a history of every job: none yet for this one.
    assert_eq!(outputs[8].code, Some(0), "{}", outputs[8].stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A child process, killed when the test ends (also when it fails).
struct Stop(std::process::Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 GET of `path` at `port` on loopback: the status code and the body.
fn http_get(port: u16, path: &str, headers: &[(&str, &str)]) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((code, body.to_owned()))
}

#[tokio::test]
async fn the_dashboard_refuses_a_non_loopback_address_without_a_token() {
    let dir = scratch("dashboard-no-token");
    let store = vec!["--lock-dir".to_owned(), dir.display().to_string()];
    let said = fails_with(&store, &["dashboard", "--listen", "0.0.0.0:0"], 2).await;
    assert!(
        said.contains("without a token") && said.contains("CRONGUARD_DASHBOARD_TOKEN"),
        "{said}"
    );
    let file = dir.join("token");
    std::fs::write(&file, "s3cret\n").expect("writes");
    let both = cli_env(
        &store,
        &["dashboard", "--listen", "0.0.0.0:0"],
        &[
            ("CRONGUARD_DASHBOARD_TOKEN", "s3cret".to_owned()),
            ("CRONGUARD_DASHBOARD_TOKEN_FILE", file.display().to_string()),
        ],
    )
    .await;
    assert_eq!(both.code, Some(2), "{}", both.stderr);
    assert!(both.stderr.contains("set one of them"), "{}", both.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_serves_the_store_with_a_token_from_a_file() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let scheduler = cronguard::builder()
        .registered_jobs(false)
        .redis_url(redis.url())
        .instance("replica-a")
        .job(job(Lock::Redis))
        .start()
        .await
        .expect("starts");
    let dir = scratch("dashboard-serves");
    let file = dir.join("token");
    std::fs::write(&file, "op-s3cret\n").expect("writes");
    let port = cronguard_testkit::free_port();
    let mut cmd = Command::new(CLI);
    for var in STORE_VARS.iter().chain(DASHBOARD_VARS) {
        cmd.env_remove(var);
    }
    let child = cmd
        .args(["--redis", &redis.url(), "dashboard", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .env("CRONGUARD_DASHBOARD_TOKEN_FILE", &file)
        .env("CRONGUARD_DASHBOARD_READ_TOKEN", "read-s3cret")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary runs");
    let _stop = Stop(child);
    let get = |path: &'static str, headers: &'static [(&'static str, &'static str)]| async move {
        tokio::task::spawn_blocking(move || http_get(port, path, headers))
            .await
            .expect("joins")
    };
    const READ: &[(&str, &str)] = &[("authorization", "Bearer read-s3cret")];
    const OPERATE: &[(&str, &str)] = &[("authorization", "Bearer op-s3cret")];
    cronguard_testkit::eventually("the dashboard lists the replica's job", WAIT, || async {
        matches!(get("/", READ).await, Some((200, body)) if body.contains("data-job=\"tick\""))
    })
    .await;
    let page = get("/", READ).await.map(|(_, body)| body);
    let anonymous = get("/", &[]).await;
    let job_page = get("/jobs/tick", OPERATE).await;
    scheduler.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    let page = page.expect("the page");
    assert!(page.contains("controls-read-only"), "{page}");
    assert_eq!(anonymous.map(|(code, _)| code), Some(401));
    let (code, body) = job_page.expect("the job's page answers");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("replica-a"), "{body}");
}
