//! The store's dashboard in a real browser, for a real Redis and a real PostgreSQL: two replicas
//! run a job every second and each serves the dashboard over the store; a third process,
//! `cronguard dashboard`, serves it too. Headless Chromium (Debian's `chromium` package) renders
//! the third process's page: its strip holds exactly the fires the store's history holds, with
//! the replica that ran each, and the replicas' own pages show the same strip. After both
//! replicas stop and another starts, the third process's page still shows the earlier fires, and
//! the new replica's page shows the same strip as the third's.
//!
//! Without `chromium` the test is skipped with a notice; in CI (`CI` set) it fails instead.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronguard::admin::Store;
use cronguard::history::Outcome;
use cronguard::{Cronguard, Job, Lock, Schedule};
use cronguard_dashboard::Dashboard;

const CLI: &str = env!("CARGO_BIN_EXE_cronguard");
const JOB: &str = "tick";
const WAIT: Duration = Duration::from_secs(30);

/// Which store the replicas share.
#[derive(Clone)]
enum Shared {
    Redis(String),
    Postgres(String),
}

impl Shared {
    async fn store(&self) -> Store {
        match self {
            Shared::Redis(url) => Store::redis(url, "cronguard").await,
            Shared::Postgres(url) => Store::postgres(url, "cronguard").await,
        }
        .expect("the store opens")
    }

    fn flag(&self) -> [&str; 2] {
        match self {
            Shared::Redis(url) => ["--redis", url],
            Shared::Postgres(url) => ["--postgres", url],
        }
    }
}

/// A replica: a scheduler running [`JOB`] that serves the store's dashboard on its own port.
struct Replica {
    scheduler: Cronguard,
    addr: SocketAddr,
}

async fn replica(shared: &Shared, instance: &str) -> Replica {
    let job =
        Job::new(JOB, Schedule::every(Duration::from_secs(1)).expect("valid")).run(|_| async {});
    let builder = cronguard::builder()
        .registered_jobs(false)
        .instance(instance);
    let builder = match shared {
        Shared::Redis(url) => builder.redis_url(url).job(job.lock(Lock::Redis)),
        Shared::Postgres(url) => builder
            .postgres_url(url)
            .job(job.lock(Lock::Postgres).history(true)),
    };
    let scheduler = builder.start().await.expect("the replica starts");
    let router = Dashboard::for_store(shared.store().await).router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Replica { scheduler, addr }
}

/// Kills the child process when dropped.
struct Stop(Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cronguard dashboard` for `shared` on loopback, without a token.
fn third_process(shared: &Shared, port: u16) -> Stop {
    let mut cmd = Command::new(CLI);
    for (var, _) in std::env::vars() {
        if var.starts_with("CRONGUARD_") || var == "REDIS_URL" || var == "DATABASE_URL" {
            cmd.env_remove(var);
        }
    }
    let child = cmd
        .args(shared.flag())
        .args(["dashboard", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary runs");
    Stop(child)
}

/// One HTTP/1.1 GET of `/` on `addr`: the body of a 200, else `None`.
fn page(addr: SocketAddr) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

async fn page_of(addr: SocketAddr) -> Option<String> {
    tokio::task::spawn_blocking(move || page(addr))
        .await
        .expect("joins")
}

/// The `(fire time, instance)` of every bar of the strip of [`JOB`] in `page`.
fn strip_of(page: &str) -> BTreeSet<(String, String)> {
    let Some(start) = page.find(&format!("<tr data-job=\"{JOB}\"")) else {
        return BTreeSet::new();
    };
    let row = &page[start..];
    let row = &row[..row.find("</tr>").unwrap_or(row.len())];
    row.split("<rect ")
        .skip(1)
        .filter_map(|rect| {
            let fire = rect.split("data-fire=\"").nth(1)?.split('"').next()?;
            let title = rect.split("<title>").nth(1)?.split("</title>").next()?;
            let instance = title.rsplit("on ").next()?.trim_end_matches(')');
            Some((fire.to_owned(), instance.to_owned()))
        })
        .collect()
}

/// The ended fires of [`JOB`] in the store's history: `(fire time, instance)`.
async fn history(store: &Store) -> BTreeSet<(String, String)> {
    store
        .history(JOB, DateTime::<Utc>::UNIX_EPOCH)
        .await
        .expect("the history")
        .into_iter()
        .filter(|e| e.outcome != Outcome::Running)
        .map(|e| (e.fire_time.to_rfc3339(), e.instance))
        .collect()
}

/// The DOM of `url` once loaded, as headless Chromium serialises it.
async fn dump_dom(url: &str) -> String {
    let profile = std::env::temp_dir().join(format!(
        "cronguard-cli-chromium-{}-{}",
        std::process::id(),
        fastrand_suffix()
    ));
    let child = tokio::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-dev-shm-usage",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromium starts");
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("chromium dumps the page within 60 s")
        .expect("chromium runs");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(out.status.success(), "chromium failed: {:?}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

async fn the_same_strip_everywhere_before_and_after_a_restart(shared: Shared) {
    let reader = shared.store().await;
    let a = replica(&shared, "replica-a").await;
    let b = replica(&shared, "replica-b").await;
    let port = cronguard_testkit::free_port();
    let third: SocketAddr = ([127, 0, 0, 1], port).into();
    let _third = third_process(&shared, port);

    cronguard_testkit::eventually("three fires in the store's history", WAIT, || async {
        history(&reader).await.len() >= 3
    })
    .await;
    let replica_pages = [a.addr, b.addr];
    a.scheduler.shutdown().await;
    b.scheduler.shutdown().await;
    let before = history(&reader).await;
    assert!(
        before
            .iter()
            .all(|(_, i)| i == "replica-a" || i == "replica-b"),
        "{before:?}"
    );
    // The third process serves once it has opened the store.
    cronguard_testkit::eventually("the third process's page", WAIT, || async {
        page_of(third).await.is_some_and(|p| strip_of(&p) == before)
    })
    .await;
    let dom = dump_dom(&format!("http://{third}/")).await;
    assert_eq!(strip_of(&dom), before, "the browser's page: {dom}");
    for addr in replica_pages {
        let page = page_of(addr).await.expect("a replica's page");
        assert_eq!(strip_of(&page), before, "a replica's page: {page}");
    }

    // Both replicas gone, another started: the earlier fires are still shown.
    let c = replica(&shared, "replica-c").await;
    cronguard_testkit::eventually("a fire of replica-c in the history", WAIT, || async {
        history(&reader).await.iter().any(|(_, i)| i == "replica-c")
    })
    .await;
    let c_page = c.addr;
    c.scheduler.shutdown().await;
    let after = history(&reader).await;
    assert!(before.is_subset(&after), "{before:?} then {after:?}");
    let dom = dump_dom(&format!("http://{third}/")).await;
    let shown = strip_of(&dom);
    assert!(
        before.is_subset(&shown),
        "the earlier fires after the restart: {before:?} in {dom}"
    );
    assert_eq!(shown, after, "{dom}");
    let page = page_of(c_page).await.expect("the new replica's page");
    assert_eq!(strip_of(&page), shown, "the new replica's page: {page}");
}

fn chromium_present() -> bool {
    cronguard_testkit::require_program(
        "chromium",
        "the store dashboard's browser test",
        "apt-get install chromium",
        cronguard_testkit::in_ci(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_store_shows_the_same_strip_on_every_process_after_a_restart() {
    if !chromium_present() {
        return;
    }
    let Some(redis) = cronguard_testkit::RedisServer::start() else {
        return;
    };
    the_same_strip_everywhere_before_and_after_a_restart(Shared::Redis(redis.url())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_store_shows_the_same_strip_on_every_process_after_a_restart() {
    if !chromium_present() {
        return;
    }
    let Some(postgres) = cronguard_testkit::PostgresServer::start() else {
        return;
    };
    the_same_strip_everywhere_before_and_after_a_restart(Shared::Postgres(postgres.url())).await;
}
