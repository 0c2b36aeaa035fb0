//! A start error names the Redis URL it could not reach, never its password, whatever form the
//! URL gives it.
#![cfg(feature = "redis")]

use std::time::Duration;

use cronguard::{Job, Lock, Schedule};

async fn start_error(url: &str) -> String {
    let job = Job::new("j", Schedule::every(Duration::from_secs(1)).expect("valid"))
        .lock(Lock::Redis)
        .run(|_| async {});
    cronguard::builder()
        .registered_jobs(false)
        .redis_url(url)
        .require_guards_at_start(true)
        .job(job)
        .start()
        .await
        .err()
        .expect("an unreachable Redis fails the start")
        .to_string()
}

#[tokio::test]
async fn a_unix_socket_url_is_reported_without_its_password() {
    let dir = std::env::temp_dir().join(format!("cronguard-no-redis-{}", std::process::id()));
    let socket = dir.join("redis.sock");
    for url in [
        format!("redis+unix://{}?pass=s3cret", socket.display()),
        format!("redis+unix://{}?db=1&password=s3cret", socket.display()),
        format!("unix://{}?pass=s3cret&db=2", socket.display()),
    ] {
        let text = start_error(&url).await;
        assert!(text.contains("cannot be reached"), "{text}");
        assert!(text.contains("=***"), "{text}");
        assert!(!text.contains("s3cret"), "{url}: {text}");
    }
}

#[tokio::test]
async fn a_sentinel_url_is_reported_without_its_passwords() {
    let port = cronguard_testkit::free_port();
    let url =
        format!("redis+sentinel://app:s3cret@127.0.0.1:{port}/mymaster/0?sentinel_password=s3cret");
    let text = start_error(&url).await;
    assert!(text.contains("cannot be reached"), "{text}");
    assert!(
        text.contains(&format!(
            "redis+sentinel://app:***@127.0.0.1:{port}/mymaster/0?sentinel_password=***"
        )),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
}
