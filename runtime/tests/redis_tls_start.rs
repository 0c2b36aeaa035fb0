//! `start()` with a `rediss://` URL: the CA given to the builder is used, and a server
//! certificate that is not trusted is a start error that says how to give the CA.
#![cfg(feature = "redis-tls")]

use std::time::Duration;

use cronguard::{Error, Job, Lock, ProblemKind, Schedule};
use cronguard_testkit::{ClientAuth, RedisTls};

fn job() -> Job {
    Job::new(
        "tls",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::Redis)
    .run(|_| async {})
}

#[tokio::test]
async fn starts_with_the_ca_of_the_builder_and_refuses_an_untrusted_certificate() {
    let Some(server) = RedisTls::start(ClientAuth::No) else {
        return;
    };
    let handle = cronguard::builder()
        .registered_jobs(false)
        .redis_url(server.url())
        .redis_tls_ca(server.ca_file())
        .require_guards_at_start(true)
        .job(job())
        .start()
        .await
        .expect("starts over TLS with the test CA");
    handle.shutdown().await;

    let url = server.url().replace("rediss://", "rediss://:s3cret@");
    let err = cronguard::builder()
        .registered_jobs(false)
        .redis_url(url)
        .redis_tls_ca(server.other_ca_file())
        .job(job())
        .start()
        .await
        .err()
        .expect("an untrusted certificate fails the start");
    let Error::Config { problems } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(problems.len(), 1, "{err}");
    assert_eq!(problems[0].kind(), ProblemKind::GuardRefused, "{err}");
    let text = err.to_string();
    assert!(text.contains("not trusted"), "{text}");
    assert!(text.contains("redis_tls_ca"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}
