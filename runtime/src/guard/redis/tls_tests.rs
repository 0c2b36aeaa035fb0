//! The Redis guard over TLS, against a real `redis-server` that speaks only TLS, with a test CA.

use cronguard_testkit::{ClientAuth, RedisTls};

use super::{connect_with, open_with, Open, RedisGuard, TlsFiles};
use crate::guard::{Claim, Guard};
use crate::options::Overlap;

fn ca(server: &RedisTls) -> TlsFiles {
    TlsFiles {
        ca: Some(server.ca_file()),
        client: None,
    }
}

fn guard(conn: super::RedisConn, job: &str) -> RedisGuard {
    RedisGuard::new(
        conn.clone(),
        super::Batcher::new(conn),
        "cronguard",
        job,
        std::time::Duration::from_secs(30),
        Overlap::Skip,
    )
}

async fn claims(conn: super::RedisConn) {
    let guard = guard(conn, "tls");
    match guard.claim(chrono::Utc::now()).await.expect("answers") {
        Claim::Acquired(lease) => lease.release().await.expect("releases"),
        other => panic!("{other:?}, expected Acquired"),
    }
}

fn misconfigured(open: Open) -> String {
    match open {
        Open::Misconfigured(why) => why,
        Open::Ready(_) => panic!("connected, expected a misconfiguration"),
        Open::Unreachable(_, why) => panic!("unreachable ({why}), expected a misconfiguration"),
    }
}

#[tokio::test]
async fn redis_guard_over_tls_passes_the_conformance_suite() {
    let Some(server) = RedisTls::start(ClientAuth::No) else {
        return;
    };
    let conn = connect_with(&server.url(), &ca(&server))
        .await
        .expect("connects over TLS with the test CA");
    super::passes_the_suite(conn.clone()).await;
}

#[tokio::test]
async fn an_untrusted_server_certificate_is_a_misconfiguration_that_says_how_to_give_the_ca() {
    let Some(server) = RedisTls::start(ClientAuth::No) else {
        return;
    };
    let other = TlsFiles {
        ca: Some(server.other_ca_file()),
        client: None,
    };
    let why = misconfigured(open_with(&server.url(), &other).await);
    assert!(why.contains("not trusted"), "{why}");
    assert!(why.contains("CRONGUARD_REDIS_CA_FILE"), "{why}");
    // The system's store does not hold the test CA either.
    let why = misconfigured(open_with(&server.url(), &TlsFiles::default()).await);
    assert!(why.contains("not trusted"), "{why}");
}

#[tokio::test]
async fn a_server_that_requires_client_certificates() {
    let Some(server) = RedisTls::start(ClientAuth::Required) else {
        return;
    };
    let with_cert = TlsFiles {
        ca: Some(server.ca_file()),
        client: Some((server.client_cert(), server.client_key())),
    };
    claims(
        connect_with(&server.url(), &with_cert)
            .await
            .expect("connects with the client certificate"),
    )
    .await;
    let why = misconfigured(open_with(&server.url(), &ca(&server)).await);
    assert!(why.contains("CRONGUARD_REDIS_CLIENT_CERT_FILE"), "{why}");
}

#[tokio::test]
async fn tls_files_with_a_url_without_tls_or_missing_files_are_misconfigurations() {
    let plain = TlsFiles {
        ca: Some("/nonexistent/ca.pem".into()),
        client: None,
    };
    let why = misconfigured(open_with("redis://127.0.0.1:1/", &plain).await);
    assert!(why.contains("does not use TLS"), "{why}");
    let why = misconfigured(open_with("rediss://127.0.0.1:1/", &plain).await);
    assert!(why.contains("cannot read the TLS CA file"), "{why}");
}
