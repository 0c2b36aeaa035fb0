//! `start()` fails once, listing every problem in words that say what to do.

use std::time::Duration;

use cronguard::{Job, Lock, Schedule};

fn redis_job(name: &str) -> Job {
    Job::new(
        name,
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::Redis)
    .run(|_| async {})
}

#[tokio::test]
async fn a_redis_job_without_a_url_names_the_settings_to_set() {
    if std::env::var_os("CRONGUARD_REDIS_URL").is_some() || std::env::var_os("REDIS_URL").is_some()
    {
        return; // this run's environment provides a URL, so there is nothing to check
    }
    let err = cronguard::builder()
        .registered_jobs(false)
        .job(redis_job("a"))
        .job(redis_job("b"))
        .start()
        .await
        .err()
        .expect("fails");
    let text = err.to_string();
    assert!(
        text.contains("jobs `a`, `b` use `lock = \"redis\"` but no Redis URL is set"),
        "{text}"
    );
    assert!(text.contains("CRONGUARD_REDIS_URL"), "{text}");
    let debug = format!("{err:?}");
    assert!(
        debug.starts_with("Config { problems: [Problem { kind: MissingUrl, job: None, message: "),
        "Debug is structural: {debug}"
    );
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn an_unreachable_redis_is_a_start_error_without_its_password() {
    let port = cronguard_testkit::free_port();
    let err = cronguard::builder()
        .registered_jobs(false)
        .redis_url(format!("redis://app:s3cret@127.0.0.1:{port}/"))
        .require_guards_at_start(true)
        .job(redis_job("c"))
        .start()
        .await
        .err()
        .expect("fails");
    let text = err.to_string();
    assert!(text.contains("cannot be reached"), "{text}");
    assert!(
        text.contains(&format!("redis://app:***@127.0.0.1:{port}/")),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
}

#[tokio::test]
async fn a_lease_on_a_non_redis_job_is_rejected() {
    let job = Job::new(
        "leased",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lease(Duration::from_secs(5))
    .run(|_| async {});
    let err = cronguard::builder()
        .registered_jobs(false)
        .job(job)
        .start()
        .await
        .err()
        .expect("fails");
    assert!(
        err.to_string()
            .contains("job `leased`: `lease` applies only to guards with leases"),
        "{err}"
    );
}
