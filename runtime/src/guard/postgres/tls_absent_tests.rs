//! A build without the `postgres-tls` feature (`cargo test -p cronguard --no-default-features
//! --features postgres`): a URL or files that ask for TLS are a misconfiguration that names the
//! feature, and `prefer` (the default) connects in plain text.

use super::connect::{PostgresTlsSettings, SslMode, Target};

#[test]
fn a_url_that_asks_for_tls_without_the_feature_names_the_feature() {
    for mode in ["require", "verify-ca", "verify-full"] {
        let url = format!("postgres://app@127.0.0.1:1/db?sslmode={mode}");
        let why = Target::parse(&url, &PostgresTlsSettings::default()).expect_err("refused");
        assert!(why.contains(&format!("`sslmode={mode}`")), "{why}");
        assert!(why.contains("`postgres-tls` feature"), "{why}");
        assert!(why.contains("Cargo.toml"), "{why}");
    }
    let ca = PostgresTlsSettings {
        ca: Some("/etc/ca.pem".into()),
        ..PostgresTlsSettings::default()
    };
    let why = Target::parse("postgres://app@127.0.0.1:1/db", &ca).expect_err("refused");
    assert!(why.contains("`postgres-tls` feature"), "{why}");
    let target = Target::parse(
        "postgres://app@127.0.0.1:1/db",
        &PostgresTlsSettings::default(),
    )
    .expect("prefer needs no TLS");
    assert_eq!(target.mode(), SslMode::Prefer);
}
