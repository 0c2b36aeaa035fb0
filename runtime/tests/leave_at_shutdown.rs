//! A shutdown leaves the process's partition groups before it returns (docs/design/ownership.md),
//! against a real `redis-server` and a real PostgreSQL: the scheduler reaches its store through a
//! proxy that the test stalls while the shutdown runs, and `shutdown` must not return before the
//! store answered the leave — a process that exits once `shutdown` returns would otherwise leave
//! its membership and its leases for the other processes to wait out.

#![cfg(any(feature = "redis", feature = "postgres"))]

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cronguard::{Builder, Job, Lock, Schedule};
use cronguard_testkit::StallProxy;

/// How long the store stays out of reach while the scheduler shuts down: well under the 5 s a
/// step of the feed's reader, and the leave, may wait for the store.
const STALL: Duration = Duration::from_millis(600);

fn job(lock: Lock) -> Job {
    // Never due in the test: the shutdown has no run to wait for, only the hand-over.
    Job::new(
        "leave-at-shutdown",
        Schedule::cron("0 0 0 1 1 *", "UTC").expect("valid"),
    )
    .lock(lock)
    .run(|_ctx| async {})
}

/// Starts a scheduler through `proxy`, waits until `members()` counts it in its partition group,
/// stalls the proxy, shuts down, and checks that the shutdown waited for the store and left the
/// group.
async fn shutdown_leaves_the_group(
    builder: Builder,
    lock: Lock,
    proxy: &StallProxy,
    members: impl Fn() -> usize,
) {
    let handle = builder
        .registered_jobs(false)
        .job(job(lock))
        .start()
        .await
        .expect("starts");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while members() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the scheduler joined its partition group within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    proxy.stall();
    let flowed = AtomicBool::new(false);
    let unstall = async {
        tokio::time::sleep(STALL).await;
        flowed.store(true, Ordering::SeqCst);
        proxy.flow();
    };
    let shutdown = async {
        handle.shutdown().await;
        flowed.load(Ordering::SeqCst)
    };
    let (returned_after_the_stall, ()) = tokio::join!(shutdown, unstall);
    assert!(
        returned_after_the_stall,
        "shutdown returned while the store was out of reach, before the group was left"
    );
    assert_eq!(members(), 0, "no member of the group after the shutdown");
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_shutdown_returns_once_the_group_is_left() {
    let Some(server) = cronguard_testkit::RedisServer::start() else {
        return;
    };
    let proxy = StallProxy::start(server.port());
    let port = server.port().to_string();
    let cli = move |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let members = move || {
        cli(&["--scan", "--pattern", "leave:{own:*}:members"])
            .lines()
            .filter(|key| !key.is_empty())
            .map(|key| cli(&["ZCARD", key]).trim().parse::<usize>().unwrap_or(0))
            .sum()
    };
    let builder = cronguard::builder()
        .redis_url(format!("redis://127.0.0.1:{}", proxy.port()))
        .redis_prefix("leave");
    shutdown_leaves_the_group(builder, Lock::Redis, &proxy, members).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_shutdown_returns_once_the_group_is_left() {
    let Some(server) = cronguard_testkit::PostgresServer::start() else {
        return;
    };
    let proxy = StallProxy::start(server.port());
    let port = server.port().to_string();
    let members = move || {
        let out = Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-d",
                "postgres",
            ])
            .args(["-tAc", "SELECT count(*) FROM cronguard.partition_members"])
            .output()
            .expect("psql runs");
        // Before the scheduler created its tables, the query fails: no member yet.
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<usize>()
            .unwrap_or(0)
    };
    let builder = cronguard::builder().postgres_url(format!(
        "postgres://postgres@127.0.0.1:{}/postgres",
        proxy.port()
    ));
    shutdown_leaves_the_group(builder, Lock::Postgres, &proxy, members).await;
}
