//! `rediss://`: the Redis guard over TLS (feature `redis-tls`, rustls).
//!
//! The server's certificate is checked against the operating system's certificate store (or the
//! Mozilla roots compiled in, with `redis-tls-webpki-roots`), or only against the CA of
//! [`TlsFiles::ca`] when one is given. A client certificate ([`TlsFiles::client`]) answers a
//! server with `tls-auth-clients yes`. Without the feature a `rediss://` URL is a start error that
//! names the feature, and none of the TLS code is compiled.

use std::path::PathBuf;

/// The files of a TLS connection, from `Builder::redis_tls_ca` and `Builder::redis_tls_client_cert`
/// or `CRONGUARD_REDIS_CA_FILE`, `CRONGUARD_REDIS_CLIENT_CERT_FILE` and
/// `CRONGUARD_REDIS_CLIENT_KEY_FILE`.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsFiles {
    /// A PEM file of the CA certificate(s) to trust instead of the system's.
    pub(crate) ca: Option<PathBuf>,
    /// PEM files of a client certificate (chain) and its private key.
    pub(crate) client: Option<(PathBuf, PathBuf)>,
}

impl TlsFiles {
    fn is_empty(&self) -> bool {
        self.ca.is_none() && self.client.is_none()
    }
}

/// Whether `url` asks for TLS.
pub(crate) fn is_tls_url(url: &str) -> bool {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
}

/// A CA or a client certificate given for a URL without TLS is a mistake: the connection would
/// be in clear text while its owner believes it is protected.
pub(crate) fn check_unused(files: &TlsFiles) -> Result<(), String> {
    if files.is_empty() {
        Ok(())
    } else {
        Err("a TLS CA or client certificate is set (`Builder::redis_tls_ca`, `Builder::redis_tls_client_cert` or `CRONGUARD_REDIS_CA_FILE` / `CRONGUARD_REDIS_CLIENT_CERT_FILE`), but the Redis URL does not use TLS; use a `rediss://` URL, or remove the TLS settings".to_owned())
    }
}

#[cfg(not(feature = "redis-tls"))]
pub(crate) const NO_TLS: &str = "this build of cronguard has no TLS support; enable the `redis-tls` feature in Cargo.toml (`cronguard = { version = \"0.1\", features = [\"redis-tls\"] }`)";

/// The client of a `rediss://` URL.
#[cfg(not(feature = "redis-tls"))]
pub(crate) fn client(_url: &str, _files: &TlsFiles) -> Result<redis::Client, String> {
    Err(format!("the URL asks for TLS (`rediss://`), but {NO_TLS}"))
}

/// The client of a `rediss://` URL.
#[cfg(feature = "redis-tls")]
pub(crate) fn client(url: &str, files: &TlsFiles) -> Result<redis::Client, String> {
    // Installs `ring` as rustls's provider when the application installed none.
    crate::guard::crypto::provider();
    if files.is_empty() {
        return redis::Client::open(url).map_err(|e| format!("the URL is not valid: {e}"));
    }
    redis::Client::build_with_tls(url, certificates(files)?)
        .map_err(|e| format!("the URL or the TLS files are not valid: {e}"))
}

/// The CA and client certificate of `files`, read from disk.
#[cfg(feature = "redis-tls")]
pub(crate) fn certificates(files: &TlsFiles) -> Result<redis::TlsCertificates, String> {
    let read = |path: &PathBuf, what: &str| {
        std::fs::read(path).map_err(|e| format!("cannot read the {what} `{}`: {e}", path.display()))
    };
    let root_cert = match &files.ca {
        Some(path) => Some(read(path, "TLS CA file")?),
        None => None,
    };
    let client_tls = match &files.client {
        Some((cert, key)) => Some(redis::ClientTlsConfig {
            client_cert: read(cert, "TLS client certificate file")?,
            client_key: read(key, "TLS client key file")?,
        }),
        None => None,
    };
    Ok(redis::TlsCertificates {
        client_tls,
        root_cert,
    })
}

/// When `e` says that the TLS handshake failed because a certificate was refused (the server's
/// by us, or ours by the server), what to do about it: a misconfiguration, not an outage.
#[cfg(feature = "redis-tls")]
pub(crate) fn refused_certificate(e: &redis::RedisError) -> Option<String> {
    // rustls's error reaches here wrapped in an `io::Error` inside an `Arc`, through which a
    // downcast cannot see; its text is stable ("invalid peer certificate: ...", "received fatal
    // alert: ...").
    let text = e.to_string();
    if text.contains("invalid peer certificate") {
        Some(format!(
            "the TLS handshake failed: the server's certificate is not trusted ({text}); give the CA that signed it with `Builder::redis_tls_ca` or `CRONGUARD_REDIS_CA_FILE` (a PEM file), or check that the URL's host name is one the certificate names"
        ))
    } else if text.contains("received fatal alert") || text.contains("peer sent no certificates") {
        Some(format!(
            "the server refused the TLS handshake ({text}); if it requires client certificates (`tls-auth-clients yes`), give one signed by its CA with `Builder::redis_tls_client_cert` or `CRONGUARD_REDIS_CLIENT_CERT_FILE` and `CRONGUARD_REDIS_CLIENT_KEY_FILE`"
        ))
    } else {
        None
    }
}

/// Without TLS support no handshake happens.
#[cfg(not(feature = "redis-tls"))]
pub(crate) fn refused_certificate(_e: &redis::RedisError) -> Option<String> {
    None
}
