//! A build without the `redis-tls` feature (`cargo test -p cronguard --no-default-features
//! --features redis`): a `rediss://` URL is a misconfiguration that names the feature.

use super::{open_with, Open, TlsFiles};

#[tokio::test]
async fn a_tls_url_without_the_feature_names_the_feature() {
    match open_with("rediss://127.0.0.1:1/", &TlsFiles::default()).await {
        Open::Misconfigured(why) => {
            assert!(why.contains("`redis-tls` feature"), "{why}");
            assert!(why.contains("Cargo.toml"), "{why}");
        }
        Open::Ready(_) | Open::Unreachable(..) => panic!("expected a misconfiguration"),
    }
}
