//! The cryptography under rustls, for the TLS of the `redis-tls` and `postgres-tls` features.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// rustls's process-wide cryptography provider. rustls needs one; when the application installed
/// none, `ring` (the one these features compile) is installed, so that a second provider
/// compiled in by another crate does not make a connection fail, and an application that
/// installed its own keeps it.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    if let Some(installed) = CryptoProvider::get_default() {
        return Arc::clone(installed);
    }
    // Err: another thread installed one first, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
    CryptoProvider::get_default()
        .map(Arc::clone)
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}
