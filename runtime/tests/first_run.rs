//! A first run is never silent: without a `tracing` subscriber, `start()` says once on stderr
//! where its events go and how to see them; with one, it says nothing.
//!
//! Each case runs in a child process (this test binary again), since a global subscriber cannot
//! be removed once installed.

use std::process::Command;

const CHILD: &str = "CRONGUARD_FIRST_RUN_CHILD";
const NOTICE: &str = "cronguard: no `tracing` subscriber is installed";

/// Starts and stops the scheduler twice, with a subscriber when `with_subscriber`.
fn child(with_subscriber: bool) {
    if with_subscriber {
        tracing_subscriber::fmt().with_writer(std::io::sink).init();
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        for _ in 0..2 {
            let handle = cronguard::builder()
                .registered_jobs(false)
                .start()
                .await
                .expect("starts");
            handle.shutdown().await;
        }
    });
}

/// Runs test `name` of this binary in a child process and returns its stderr.
fn stderr_of(name: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("the child runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn without_a_subscriber_start_says_once_where_events_go() {
    if std::env::var_os(CHILD).is_some() {
        return child(false);
    }
    let stderr = stderr_of("without_a_subscriber_start_says_once_where_events_go");
    assert_eq!(stderr.matches(NOTICE).count(), 1, "{stderr}");
    assert!(
        stderr.contains("tracing_subscriber::fmt().init()"),
        "{stderr}"
    );
}

#[test]
fn with_a_subscriber_start_says_nothing() {
    if std::env::var_os(CHILD).is_some() {
        return child(true);
    }
    let stderr = stderr_of("with_a_subscriber_start_says_nothing");
    assert!(!stderr.contains(NOTICE), "{stderr}");
}
