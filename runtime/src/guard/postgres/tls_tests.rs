//! The `postgres` guard over TLS, against a real PostgreSQL that accepts only TLS connections
//! (`hostnossl … reject`), with a test CA: each `sslmode`, a private CA, a certificate that is not
//! trusted, a host name the certificate does not name, client certificates.

use std::sync::Arc;
use std::time::Duration;

use cronguard_testkit::{ClientAuth, PostgresServer, PostgresTls};

use super::connect::{PoolOptions, PostgresTlsSettings, Target};
use super::{Database, Open, OpenFailure, PostgresGuard, PostgresSettings};
use crate::guard::{Claim, Guard};
use crate::options::Overlap;

fn settings(url: &str, tls: PostgresTlsSettings) -> PostgresSettings {
    let mut settings = PostgresSettings::for_url(url, "cronguard");
    settings.tls = tls;
    settings
}

fn ca(file: std::path::PathBuf) -> PostgresTlsSettings {
    PostgresTlsSettings {
        ca: Some(file),
        ..PostgresTlsSettings::default()
    }
}

async fn connect(url: &str, tls: PostgresTlsSettings) -> Result<Database, String> {
    Database::connect_with(&settings(url, tls)).await
}

/// What opening the store says, when it is a misconfiguration: never "unreachable".
async fn refused(url: &str, tls: PostgresTlsSettings) -> String {
    let (pool, wait) = settings(url, tls).pool().expect("valid settings");
    match Database::open(pool, wait, "cronguard").await {
        Open::Failed(failure @ (OpenFailure::Tls(_) | OpenFailure::Refused(_))) => {
            failure.to_string()
        }
        Open::Failed(other) => panic!("{other}, expected a refusal of TLS"),
        Open::Ready(_) => panic!("connected, expected a refusal"),
        Open::Unreachable(_, why) => panic!("unreachable ({why}), expected a refusal"),
    }
}

/// Whether this connection of `db` is encrypted, as the server sees it.
async fn encrypted(db: &Database) -> bool {
    let rows = db
        .query(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("answers");
    super::first(&rows)
        .and_then(|row| row.try_get(0).map_err(|e| super::pg_err(&e)))
        .expect("a row")
}

async fn claims(db: Database) {
    let guard = PostgresGuard::new(
        Arc::new(db),
        "tls",
        Arc::from("test"),
        Duration::from_secs(30),
        Overlap::Skip,
        false,
    );
    match guard.claim(chrono::Utc::now()).await.expect("answers") {
        Claim::Acquired(lease) => lease.release().await.expect("releases"),
        other => panic!("{other:?}, expected Acquired"),
    }
}

#[tokio::test]
async fn postgres_guard_over_tls_with_verify_full_and_a_private_ca_passes_the_conformance_suite() {
    let Some(server) = PostgresTls::start(ClientAuth::No) else {
        return;
    };
    let db = Arc::new(
        connect(&server.url("verify-full"), ca(server.ca_file()))
            .await
            .expect("connects over TLS with the test CA"),
    );
    assert!(encrypted(&db).await);
    let report = crate::guard::conformance::check(|spec| {
        Arc::new(
            PostgresGuard::new(
                Arc::clone(&db),
                &spec.job,
                Arc::from(spec.instance.as_str()),
                spec.lease,
                spec.overlap,
                spec.history,
            )
            .with_misfire_grace(spec.misfire_grace),
        )
    })
    .await
    .unwrap_or_else(|failure| panic!("{failure}"));
    assert!(report.skipped.is_empty(), "{report}");
}

#[tokio::test]
async fn a_certificate_not_trusted_is_a_misconfiguration_that_says_how_to_give_the_ca() {
    let Some(server) = PostgresTls::start(ClientAuth::No) else {
        return;
    };
    for tls in [
        // The operating system's store does not hold the test CA.
        PostgresTlsSettings::default(),
        ca(server.other_ca_file()),
    ] {
        for mode in ["verify-full", "verify-ca"] {
            let why = refused(&server.url(mode), tls.clone()).await;
            assert!(why.contains("not trusted"), "{why}");
            assert!(why.contains("CRONGUARD_POSTGRES_CA_FILE"), "{why}");
            assert!(why.contains("postgres_tls_ca"), "{why}");
        }
    }
    // `require` with a CA checks the chain, as libpq does.
    let why = refused(&server.url("require"), ca(server.other_ca_file())).await;
    assert!(why.contains("not trusted"), "{why}");
}

#[tokio::test]
async fn verify_full_checks_the_host_name_and_verify_ca_does_not() {
    let Some(server) = PostgresTls::start(ClientAuth::No) else {
        return;
    };
    // The socket goes to 127.0.0.1 (`hostaddr`); the certificate is checked against `host`.
    let url = |mode: &str| {
        format!(
            "postgres://postgres@db.wrong-name.test:{}/postgres?hostaddr=127.0.0.1&sslmode={mode}",
            server.port()
        )
    };
    let why = refused(&url("verify-full"), ca(server.ca_file())).await;
    assert!(why.contains("not trusted"), "{why}");
    assert!(why.contains("does not name the host"), "{why}");
    let db = connect(&url("verify-ca"), ca(server.ca_file()))
        .await
        .expect("verify-ca checks the chain only");
    assert!(encrypted(&db).await);
    // The same host name through `localhost`, which the certificate names.
    let local = format!(
        "postgres://postgres@localhost:{}/postgres?hostaddr=127.0.0.1&sslmode=verify-full",
        server.port()
    );
    claims(
        connect(&local, ca(server.ca_file()))
            .await
            .expect("connects"),
    )
    .await;
}

#[tokio::test]
async fn require_and_prefer_encrypt_without_a_ca_and_disable_is_refused_with_what_to_do() {
    let Some(server) = PostgresTls::start(ClientAuth::No) else {
        return;
    };
    for mode in ["require", "prefer"] {
        let db = connect(&server.url(mode), PostgresTlsSettings::default())
            .await
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(encrypted(&db).await, "{mode}");
        claims(db).await;
    }
    let why = refused(&server.url("disable"), PostgresTlsSettings::default()).await;
    assert!(why.contains("refuses this connection without TLS"), "{why}");
    assert!(why.contains("sslmode=verify-full"), "{why}");
}

#[tokio::test]
async fn prefer_connects_in_plain_text_to_a_server_without_tls_and_require_says_it_has_none() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = connect(&server.url(), PostgresTlsSettings::default())
        .await
        .expect("prefer falls back to plain text");
    assert!(!encrypted(&db).await);
    let why = refused(
        &format!("{}?sslmode=require", server.url()),
        PostgresTlsSettings::default(),
    )
    .await;
    assert!(why.contains("does not offer TLS"), "{why}");
}

#[tokio::test]
async fn a_server_that_requires_client_certificates() {
    let Some(server) = PostgresTls::start(ClientAuth::Required) else {
        return;
    };
    let with_cert = PostgresTlsSettings {
        ca: Some(server.ca_file()),
        client_cert: Some(server.client_cert()),
        client_key: Some(server.client_key()),
    };
    claims(
        connect(&server.url("verify-full"), with_cert)
            .await
            .expect("connects with the client certificate"),
    )
    .await;
    // The same files as the URL's `sslrootcert`, `sslcert` and `sslkey`.
    let in_url = format!(
        "{}&sslrootcert={}&sslcert={}&sslkey={}",
        server.url("verify-full"),
        server.ca_file().display(),
        server.client_cert().display(),
        server.client_key().display()
    );
    claims(
        connect(&in_url, PostgresTlsSettings::default())
            .await
            .expect("connects with the URL's files"),
    )
    .await;
    let why = refused(&server.url("verify-full"), ca(server.ca_file())).await;
    assert!(why.contains("client certificate"), "{why}");
    assert!(why.contains("CRONGUARD_POSTGRES_CLIENT_CERT_FILE"), "{why}");
}

#[test]
fn tls_files_that_cannot_be_used_are_named() {
    let dir = std::env::temp_dir().join(format!("cronguard-pg-tls-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch dir");
    let not_pem = dir.join("not-a-certificate.pem");
    std::fs::write(&not_pem, "hello").expect("writes");
    let pool = |tls: PostgresTlsSettings| {
        Target::parse("postgres://127.0.0.1:1/db?sslmode=verify-full", &tls)
            .and_then(|target| target.pool(&PoolOptions::default()))
            .map(|_| ())
    };
    let missing = dir.join("missing.pem");
    let why = pool(ca(missing.clone())).expect_err("refused");
    assert!(why.contains("cannot read the TLS CA file"), "{why}");
    assert!(why.contains(&missing.display().to_string()), "{why}");
    let why = pool(ca(not_pem.clone())).expect_err("refused");
    assert!(why.contains("holds no certificate"), "{why}");
    assert!(why.contains("not-a-certificate.pem"), "{why}");
    let why = pool(PostgresTlsSettings {
        client_cert: Some(missing.clone()),
        client_key: Some(missing),
        ..PostgresTlsSettings::default()
    })
    .expect_err("refused");
    assert!(
        why.contains("cannot read the TLS client certificate file"),
        "{why}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
