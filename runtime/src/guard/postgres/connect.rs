//! How the `postgres` guard connects: the URL and its `sslmode` (with the feature `postgres-tls`,
//! TLS through rustls as libpq does it), the CA and client certificate files, and the pool (its
//! size and timeouts), or a pool the application hands over (`Builder::postgres_pool`). The
//! scheduler's guards, the command-line tool and the benchmarks all connect through here.
//!
//! tokio-postgres reads `sslmode` as `disable`, `prefer` or `require` only, and refuses
//! `sslrootcert`, `sslcert` and `sslkey` as unknown options; those four parameters are taken out
//! of the URL here (in both the `postgres://` and the `key=value` form) and applied to rustls's
//! configuration:
//!
//! | `sslmode` | TLS | the server's certificate |
//! | --- | --- | --- |
//! | `disable` | never | — |
//! | `prefer` (the default) | when the server offers it, else plain | not checked; with a CA given, its chain is (as libpq does when it finds a root certificate) |
//! | `require` | always | not checked; with a CA given, its chain is (as libpq) |
//! | `verify-ca` | always | its chain, up to the CA given or else the operating system's store |
//! | `verify-full` | always | its chain, and that it names the URL's host |
//!
//! `prefer` falls back to plain text only when the server answers that it does not do TLS; a
//! handshake that fails with a server that offers TLS is an error (libpq would try again in
//! plain text), so that a wrong CA or a refused client certificate is seen, not hidden. Over a
//! Unix socket no TLS is used, whatever `sslmode` says (as libpq).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

/// Connections one process keeps by default: claims of many jobs share them.
pub const DEFAULT_POSTGRES_POOL_SIZE: usize = 8;

/// How long making one connection (TCP, TLS, authentication) may take by default.
pub const DEFAULT_POSTGRES_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a statement may wait by default for a connection of the pool when all are in use.
pub const DEFAULT_POSTGRES_POOL_WAIT_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest connect or wait timeout: a claim waits for it, and a fire's grace is a minute by
/// default.
const MAX_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a pooled connection may take to be checked before reuse.
const RECYCLE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the URL's `sslmode` asks for (libpq's names; `allow` is not supported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            "allow" => return Err("`sslmode=allow` (plain text first, TLS only when the server insists) is not supported; use `prefer` (TLS when the server offers it) or `disable`".to_owned()),
            other => return Err(format!(
                "`sslmode={other}` is not one of `disable`, `prefer`, `require`, `verify-ca`, `verify-full`"
            )),
        })
    }

    /// The mode as the URL writes it.
    #[cfg(not(feature = "postgres-tls"))]
    fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Whether a connection without TLS is refused.
    #[cfg(not(feature = "postgres-tls"))]
    fn requires_tls(self) -> bool {
        matches!(
            self,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
        )
    }
}

/// The TLS files given outside the URL: `Builder::postgres_tls_ca` and
/// `Builder::postgres_tls_client_cert`, or `CRONGUARD_POSTGRES_CA_FILE`,
/// `CRONGUARD_POSTGRES_CLIENT_CERT_FILE` and `CRONGUARD_POSTGRES_CLIENT_KEY_FILE`.
#[derive(Debug, Clone, Default)]
pub(crate) struct PostgresTlsSettings {
    /// A PEM file of the CA certificate(s) to trust.
    pub(crate) ca: Option<PathBuf>,
    /// A PEM file of the client certificate (chain).
    pub(crate) client_cert: Option<PathBuf>,
    /// A PEM file of the client certificate's private key.
    pub(crate) client_key: Option<PathBuf>,
}

impl PostgresTlsSettings {
    /// The settings the environment gives.
    pub(crate) fn from_env() -> Self {
        let env = crate::env::var;
        PostgresTlsSettings {
            ca: env("CRONGUARD_POSTGRES_CA_FILE").map(PathBuf::from),
            client_cert: env("CRONGUARD_POSTGRES_CLIENT_CERT_FILE").map(PathBuf::from),
            client_key: env("CRONGUARD_POSTGRES_CLIENT_KEY_FILE").map(PathBuf::from),
        }
    }

    fn client(&self) -> Result<Option<(PathBuf, PathBuf)>, String> {
        match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => Ok(Some((cert.clone(), key.clone()))),
            (None, None) => Ok(None),
            (Some(_), None) => Err("`CRONGUARD_POSTGRES_CLIENT_CERT_FILE` is set but `CRONGUARD_POSTGRES_CLIENT_KEY_FILE` is not; set both (the client certificate and its key), or neither".to_owned()),
            (None, Some(_)) => Err("`CRONGUARD_POSTGRES_CLIENT_KEY_FILE` is set but `CRONGUARD_POSTGRES_CLIENT_CERT_FILE` is not; set both (the client certificate and its key), or neither".to_owned()),
        }
    }
}

/// What the server's certificate chain is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    /// The CA certificate(s) of a PEM file, and nothing else.
    File(PathBuf),
    /// The operating system's certificate store (`sslrootcert=system`, or no CA given).
    System,
}

/// The TLS parameters taken out of a URL (libpq's names), as written.
#[derive(Debug, Default, PartialEq, Eq)]
struct UrlTls {
    mode: Option<String>,
    rootcert: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

impl UrlTls {
    /// Keeps `value` when `key` is one of the parameters read here; `false` otherwise.
    fn take(&mut self, key: &str, value: String) -> bool {
        let slot = match key {
            "sslmode" => &mut self.mode,
            "sslrootcert" => &mut self.rootcert,
            "sslcert" => &mut self.cert,
            "sslkey" => &mut self.key,
            _ => return false,
        };
        *slot = Some(value);
        true
    }
}

/// A PostgreSQL URL ready to connect: tokio-postgres's settings, and TLS as the URL's `sslmode`
/// and the files ask.
#[derive(Debug)]
pub(crate) struct Target {
    config: tokio_postgres::Config,
    mode: SslMode,
    // Read by the TLS setup of `postgres-tls`; without it, any file given is a start error.
    #[cfg_attr(not(feature = "postgres-tls"), allow(dead_code))]
    roots: Option<Roots>,
    #[cfg_attr(not(feature = "postgres-tls"), allow(dead_code))]
    client: Option<(PathBuf, PathBuf)>,
}

/// The size and timeouts of a pool cronguard makes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PoolOptions {
    /// `Builder::postgres_pool_size` or `CRONGUARD_POSTGRES_POOL_SIZE`.
    pub(crate) size: Option<usize>,
    /// `Builder::postgres_connect_timeout`; else the URL's `connect_timeout`.
    pub(crate) connect_timeout: Option<Duration>,
    /// `Builder::postgres_pool_wait_timeout`.
    pub(crate) wait_timeout: Option<Duration>,
}

impl PoolOptions {
    /// The problems of settings out of range, each saying what to give instead.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.size == Some(0) {
            problems.push("the PostgreSQL pool size is 0 (`Builder::postgres_pool_size` or `CRONGUARD_POSTGRES_POOL_SIZE`); give 1 or more connections (the default is 8)".to_owned());
        }
        for (what, timeout) in [
            ("`Builder::postgres_connect_timeout`", self.connect_timeout),
            ("`Builder::postgres_pool_wait_timeout`", self.wait_timeout),
        ] {
            if let Some(timeout) = timeout.filter(|t| t.is_zero() || *t > MAX_TIMEOUT) {
                problems.push(format!(
                    "{what} of {timeout:?} is out of range; give more than zero and at most {} s (the default is 2 s)",
                    MAX_TIMEOUT.as_secs()
                ));
            }
        }
        problems
    }

    /// How long a statement waits for a pooled connection, a new one made included: the longer
    /// of the wait and connect timeouts (`connect` is the URL's own when the builder gives none).
    fn deadline(&self, connect: Option<Duration>) -> Duration {
        let wait = self
            .wait_timeout
            .unwrap_or(DEFAULT_POSTGRES_POOL_WAIT_TIMEOUT);
        wait.max(connect.unwrap_or(DEFAULT_POSTGRES_CONNECT_TIMEOUT))
    }

    /// How long a statement waits for a connection of the application's pool.
    pub(crate) fn shared_deadline(&self) -> Duration {
        self.wait_timeout
            .unwrap_or(DEFAULT_POSTGRES_POOL_WAIT_TIMEOUT)
    }
}

impl Target {
    /// Reads `url` (`postgres://…` or `key=value …`) with the files of `tls`; the error says what
    /// is wrong and what to change.
    pub(crate) fn parse(url: &str, tls: &PostgresTlsSettings) -> Result<Target, String> {
        let (rest, url_tls) = take_tls_params(url)?;
        let mut config = tokio_postgres::Config::from_str(&rest)
            .map_err(|e| format!("the PostgreSQL URL is not valid: {e}"))?;
        let mode = match &url_tls.mode {
            Some(mode) => SslMode::parse(mode)?,
            None => SslMode::Prefer,
        };
        let roots = match (&url_tls.rootcert, &tls.ca) {
            (Some(rootcert), None) if rootcert == "system" => Some(Roots::System),
            (Some(rootcert), None) => Some(Roots::File(PathBuf::from(rootcert))),
            (None, Some(ca)) => Some(Roots::File(ca.clone())),
            (None, None) => None,
            (Some(rootcert), Some(ca)) if std::path::Path::new(rootcert) == ca => {
                Some(Roots::File(ca.clone()))
            }
            (Some(rootcert), Some(ca)) => {
                return Err(format!(
                    "the CA is given twice, as `sslrootcert={rootcert}` in the URL and as `{}` (`Builder::postgres_tls_ca` or `CRONGUARD_POSTGRES_CA_FILE`); keep one",
                    ca.display()
                ))
            }
        };
        let url_client = match (url_tls.cert, url_tls.key) {
            (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
            (None, None) => None,
            (Some(_), None) => return Err("the URL has `sslcert` but no `sslkey`; give both (the client certificate and its key), or neither".to_owned()),
            (None, Some(_)) => return Err("the URL has `sslkey` but no `sslcert`; give both (the client certificate and its key), or neither".to_owned()),
        };
        let client = match (url_client, tls.client()?) {
            (Some(url), Some(given)) if url != given => return Err(
                "the client certificate is given twice, as `sslcert`/`sslkey` in the URL and with `Builder::postgres_tls_client_cert` or `CRONGUARD_POSTGRES_CLIENT_CERT_FILE`/`CRONGUARD_POSTGRES_CLIENT_KEY_FILE`; keep one".to_owned(),
            ),
            (url, given) => url.or(given),
        };
        let files_given = matches!(roots, Some(Roots::File(_))) || client.is_some();
        if mode == SslMode::Disable && files_given {
            return Err("a TLS CA or client certificate is set (`sslrootcert`/`sslcert` in the URL, `Builder::postgres_tls_ca`, `Builder::postgres_tls_client_cert` or `CRONGUARD_POSTGRES_CA_FILE` / `CRONGUARD_POSTGRES_CLIENT_CERT_FILE`), but the URL says `sslmode=disable`; use `sslmode=verify-full` (or `require`), or remove the TLS settings".to_owned());
        }
        check_build(mode, files_given)?;
        // Over a Unix socket the server does no TLS; libpq ignores `sslmode` there.
        let sockets_only = !config.get_hosts().is_empty()
            && config.get_hostaddrs().is_empty()
            && config
                .get_hosts()
                .iter()
                .all(|host| !matches!(host, tokio_postgres::config::Host::Tcp(_)));
        config.ssl_mode(match mode {
            _ if sockets_only => tokio_postgres::config::SslMode::Disable,
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        });
        Ok(Target {
            mode: if sockets_only { SslMode::Disable } else { mode },
            config,
            roots,
            client,
        })
    }

    /// The `sslmode` the connections use.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn mode(&self) -> SslMode {
        self.mode
    }

    /// The pool of connections to this target, none made yet, and how long a statement may
    /// wait for one of them. The TLS files are read here: one that cannot be read or used is an
    /// error naming it.
    pub(crate) fn pool(mut self, options: &PoolOptions) -> Result<(Pool, Duration), String> {
        let connect = options
            .connect_timeout
            .or(self.config.get_connect_timeout().copied());
        let connect_timeout = connect.unwrap_or(DEFAULT_POSTGRES_CONNECT_TIMEOUT);
        self.config.connect_timeout(connect_timeout);
        self.config.keepalives_idle(Duration::from_secs(30));
        if self.config.get_application_name().is_none() {
            self.config.application_name("cronguard");
        }
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = if self.mode == SslMode::Disable {
            Manager::from_config(self.config, tokio_postgres::NoTls, manager_config)
        } else {
            self.manager_with_tls(manager_config)?
        };
        let pool = Pool::builder(manager)
            .max_size(options.size.unwrap_or(DEFAULT_POSTGRES_POOL_SIZE))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(
                options
                    .wait_timeout
                    .unwrap_or(DEFAULT_POSTGRES_POOL_WAIT_TIMEOUT),
            ))
            .create_timeout(Some(connect_timeout))
            .recycle_timeout(Some(RECYCLE_TIMEOUT))
            .build()
            .map_err(|e| format!("cannot set up the PostgreSQL connection pool: {e}"))?;
        Ok((pool, options.deadline(connect)))
    }

    /// `prefer` without the feature: plain text, as libpq built without TLS does (the other
    /// modes and any TLS file were refused by [`check_build`]).
    #[cfg(not(feature = "postgres-tls"))]
    fn manager_with_tls(self, manager_config: ManagerConfig) -> Result<Manager, String> {
        Ok(Manager::from_config(
            self.config,
            tokio_postgres::NoTls,
            manager_config,
        ))
    }

    #[cfg(feature = "postgres-tls")]
    fn manager_with_tls(self, manager_config: ManagerConfig) -> Result<Manager, String> {
        let tls = tls::client_config(self.mode, self.roots.as_ref(), self.client.as_ref())?;
        Ok(Manager::from_config(
            self.config,
            tokio_postgres_rustls::MakeRustlsConnect::new(tls),
            manager_config,
        ))
    }
}

/// How a build without TLS answers a URL or files that ask for it.
#[cfg(not(feature = "postgres-tls"))]
fn check_build(mode: SslMode, files_given: bool) -> Result<(), String> {
    const NO_TLS: &str = "this build of cronguard has no PostgreSQL TLS support; enable the `postgres-tls` feature in Cargo.toml (`cronguard = { version = \"0.1\", features = [\"postgres\", \"postgres-tls\"] }`)";
    if mode.requires_tls() {
        Err(format!(
            "the URL asks for TLS (`sslmode={}`), but {NO_TLS}",
            mode.as_str()
        ))
    } else if files_given {
        Err(format!(
            "a TLS CA or client certificate is set, but {NO_TLS}"
        ))
    } else {
        Ok(())
    }
}

#[cfg(feature = "postgres-tls")]
fn check_build(_mode: SslMode, _files_given: bool) -> Result<(), String> {
    Ok(())
}

/// Splits the TLS parameters read here out of `url`: what is left for tokio-postgres, and them.
fn take_tls_params(url: &str) -> Result<(String, UrlTls), String> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        take_from_url(url)
    } else {
        take_from_key_values(url)
    }
}

/// The `?a=b&c=d` of a `postgres://` URL; values are percent-decoded.
fn take_from_url(url: &str) -> Result<(String, UrlTls), String> {
    let mut found = UrlTls::default();
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), found));
    };
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(key)?;
        if !found.take(&key, percent_decode(value)?) {
            kept.push(pair);
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, found))
}

/// `%XX` escapes decoded, as libpq reads a URL's parameters.
fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let byte = bytes
                .get(i + 1..i + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| {
                    "the PostgreSQL URL has a `%` that is not followed by two hex digits in its parameters; write a `%` as `%25`".to_owned()
                })?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| {
        "a parameter of the PostgreSQL URL is not UTF-8 once percent-decoded".to_owned()
    })
}

/// The `key=value` form (libpq's rules: values in single quotes or bare, `\` escapes); what
/// is left is written again with every value quoted.
fn take_from_key_values(text: &str) -> Result<(String, UrlTls), String> {
    let mut found = UrlTls::default();
    let mut kept: Vec<String> = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        if key.is_empty() {
            if chars.peek().is_none() {
                break;
            }
            return Err("the PostgreSQL connection string has a `=` without a key before it; write `key=value` pairs separated by spaces, or a `postgres://` URL".to_owned());
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(format!(
                "the PostgreSQL connection string has `{key}` without `=value`; write `key=value` pairs separated by spaces, or a `postgres://` URL"
            ));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                    None => return Err(format!(
                        "the value of `{key}` in the PostgreSQL connection string has no closing `'`"
                    )),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        if !found.take(&key, value.clone()) {
            let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
            kept.push(format!("{key}='{quoted}'"));
        }
    }
    Ok((kept.join(" "), found))
}

/// When `e`, met while connecting, is a failed TLS handshake or a server that refused the
/// connection for a reason of TLS, what is wrong and what to do: a misconfiguration to report at
/// start, not an outage to wait out.
pub(crate) fn tls_problem(e: &tokio_postgres::Error) -> Option<String> {
    if let Some(db) = e.as_db_error() {
        let message = db.message();
        return if message.contains("no encryption") {
            Some(format!(
                "the server refuses this connection without TLS ({message}); set `sslmode=verify-full` (or `require`) in the URL{}",
                if cfg!(feature = "postgres-tls") {
                    ""
                } else {
                    ", and enable the `postgres-tls` feature of cronguard in Cargo.toml"
                }
            ))
        } else if message.contains("certificate") {
            Some(format!(
                "the server wants a client certificate ({message}); give one signed by the CA it trusts (its `ssl_ca_file`), whose common name is the user name, with `Builder::postgres_tls_client_cert`, `CRONGUARD_POSTGRES_CLIENT_CERT_FILE` and `CRONGUARD_POSTGRES_CLIENT_KEY_FILE`, or `sslcert` and `sslkey` in the URL"
            ))
        } else {
            None
        };
    }
    handshake_problem(e)
}

/// A failed TLS handshake, said with what to do.
#[cfg(feature = "postgres-tls")]
fn handshake_problem(e: &tokio_postgres::Error) -> Option<String> {
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let rustls_error = cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        match rustls_error {
            Some(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => {
                return Some(format!(
                    "the TLS handshake failed: the server's certificate is not trusted, as it does not name the host of the URL ({}); connect with a host name the certificate names (`sslmode=verify-full` checks it, `verify-ca` does not)",
                    rustls_error.map(ToString::to_string).unwrap_or_default()
                ))
            }
            Some(invalid @ rustls::Error::InvalidCertificate(_)) => {
                return Some(format!(
                    "the TLS handshake failed: the server's certificate is not trusted ({invalid}); give the CA that signed it with `Builder::postgres_tls_ca`, `CRONGUARD_POSTGRES_CA_FILE` or `sslrootcert` in the URL (a PEM file)"
                ))
            }
            Some(alert @ rustls::Error::AlertReceived(_)) => {
                return Some(format!(
                    "the server refused the TLS handshake ({alert}); if it requires client certificates, give one signed by its CA with `Builder::postgres_tls_client_cert`, `CRONGUARD_POSTGRES_CLIENT_CERT_FILE` and `CRONGUARD_POSTGRES_CLIENT_KEY_FILE`, or `sslcert` and `sslkey` in the URL"
                ))
            }
            Some(other) => return Some(format!("the TLS handshake failed ({other})")),
            None => {}
        }
        if cause.to_string() == "server does not support TLS" {
            return Some("the server does not offer TLS, but the URL's `sslmode` asks for it; turn on `ssl` on the server, or use `sslmode=prefer` (TLS when offered) or `disable`".to_owned());
        }
        source = cause.source();
    }
    None
}

/// Without TLS support no handshake happens.
#[cfg(not(feature = "postgres-tls"))]
fn handshake_problem(_e: &tokio_postgres::Error) -> Option<String> {
    None
}

/// rustls's configuration for each `sslmode`.
#[cfg(feature = "postgres-tls")]
mod tls {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::client::WebPkiServerVerifier;
    use rustls::crypto::CryptoProvider;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

    use super::{Roots, SslMode};

    /// The client configuration of `mode`: see the table of the module's documentation.
    pub(super) fn client_config(
        mode: SslMode,
        roots: Option<&Roots>,
        client: Option<&(PathBuf, PathBuf)>,
    ) -> Result<ClientConfig, String> {
        let provider = crate::guard::crypto::provider();
        let verifier: Arc<dyn ServerCertVerifier> = match (mode, roots) {
            (SslMode::Prefer | SslMode::Require, None) => {
                Arc::new(Unchecked(Arc::clone(&provider)))
            }
            (SslMode::VerifyFull, roots) => web_pki(roots.unwrap_or(&Roots::System), &provider)?,
            (_, roots) => Arc::new(ChainOnly(web_pki(
                roots.unwrap_or(&Roots::System),
                &provider,
            )?)),
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS for PostgreSQL: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = certificates(cert, "TLS client certificate file")?;
                let key_der = PrivateKeyDer::from_pem_slice(&read(key, "TLS client key file")?)
                    .map_err(|e| {
                        format!(
                            "the TLS client key file `{}` holds no private key in PEM form ({e}); give the key of the client certificate, PEM-encoded",
                            key.display()
                        )
                    })?;
                builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                    format!(
                        "the TLS client key `{}` cannot be used with the certificate `{}` ({e}); give the key that belongs to the certificate",
                        key.display(),
                        cert.display()
                    )
                })?
            }
        };
        // What libpq sends, and what PostgreSQL 17 requires for `sslnegotiation=direct`.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(config)
    }

    fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
        std::fs::read(path).map_err(|e| format!("cannot read the {what} `{}`: {e}", path.display()))
    }

    /// Every certificate of the PEM file `path`; none is an error.
    fn certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
        let pem = read(path, what)?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("the {what} `{}` is not valid PEM ({e})", path.display()))?;
        if certs.is_empty() {
            return Err(format!(
                "the {what} `{}` holds no certificate (no `-----BEGIN CERTIFICATE-----` block); give a PEM file of certificates",
                path.display()
            ));
        }
        Ok(certs)
    }

    /// The chain and host name check of rustls (webpki) against `roots`.
    fn web_pki(
        roots: &Roots,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Arc<WebPkiServerVerifier>, String> {
        let mut store = RootCertStore::empty();
        match roots {
            Roots::File(path) => {
                for cert in certificates(path, "TLS CA file")? {
                    store.add(cert).map_err(|e| {
                        format!(
                            "the TLS CA file `{}` holds a certificate that cannot be a trust anchor ({e}); give the PEM file of the CA certificate(s)",
                            path.display()
                        )
                    })?;
                }
            }
            Roots::System => {
                let found = rustls_native_certs::load_native_certs();
                store.add_parsable_certificates(found.certs);
                if store.is_empty() {
                    return Err("the operating system's certificate store holds no certificate to check the PostgreSQL server's against (on Debian and Ubuntu, install `ca-certificates`); give the CA with `Builder::postgres_tls_ca`, `CRONGUARD_POSTGRES_CA_FILE` or `sslrootcert` in the URL".to_owned());
                }
            }
        }
        WebPkiServerVerifier::builder_with_provider(Arc::new(store), Arc::clone(provider))
            .build()
            .map_err(|e| {
                format!("cannot set up the check of the PostgreSQL server's certificate: {e}")
            })
    }

    /// `verify-ca`, and `prefer`/`require` with a CA: the chain is checked, the name is not.
    #[derive(Debug)]
    struct ChainOnly(Arc<WebPkiServerVerifier>);

    impl ServerCertVerifier for ChainOnly {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp_response: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            // webpki checks the chain first and the name last: a name that does not match is
            // the only failure left once the chain is trusted.
            match self.0.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ) {
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                )) => Ok(ServerCertVerified::assertion()),
                other => other,
            }
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_verify_schemes()
        }
    }

    /// `prefer` and `require` without a CA: the connection is encrypted, the certificate is not
    /// checked (the handshake's signatures still are), as libpq does.
    #[derive(Debug)]
    struct Unchecked(Arc<CryptoProvider>);

    impl ServerCertVerifier for Unchecked {
        fn verify_server_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _server_name: &ServerName<'_>,
            _ocsp_response: &[u8],
            _now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<Target, String> {
        Target::parse(url, &PostgresTlsSettings::default())
    }

    #[test]
    fn tls_parameters_are_taken_out_of_both_forms() {
        let (rest, tls) = take_tls_params(
            "postgres://app:pw@db.example:5432/app?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20dir%2Fca.pem&sslcert=/c.pem&sslkey=/k.pem",
        )
        .expect("parses");
        assert_eq!(
            rest,
            "postgres://app:pw@db.example:5432/app?application_name=x"
        );
        assert_eq!(
            tls,
            UrlTls {
                mode: Some("verify-full".into()),
                rootcert: Some("/etc/ca dir/ca.pem".into()),
                cert: Some("/c.pem".into()),
                key: Some("/k.pem".into()),
            }
        );
        let (rest, tls) = take_tls_params("postgresql://db/app?sslmode=require").expect("parses");
        assert_eq!(rest, "postgresql://db/app");
        assert_eq!(tls.mode.as_deref(), Some("require"));

        let (rest, tls) = take_tls_params(
            "host=db.example user=app password='s3 \\'cr\\\\et' sslmode = verify-ca sslrootcert='/etc/my ca.pem' dbname=a\\ b",
        )
        .expect("parses");
        assert_eq!(
            rest,
            "host='db.example' user='app' password='s3 \\'cr\\\\et' dbname='a b'"
        );
        assert_eq!(tls.mode.as_deref(), Some("verify-ca"));
        assert_eq!(tls.rootcert.as_deref(), Some("/etc/my ca.pem"));
        let config = tokio_postgres::Config::from_str(&rest).expect("tokio-postgres reads it");
        assert_eq!(config.get_password(), Some(&b"s3 'cr\\et"[..]));
        assert_eq!(config.get_dbname(), Some("a b"));
    }

    #[test]
    fn every_libpq_mode_is_read_and_allow_is_refused() {
        for (url, mode) in [
            ("postgres://db/app", SslMode::Prefer),
            ("postgres://db/app?sslmode=disable", SslMode::Disable),
            ("postgres://db/app?sslmode=prefer", SslMode::Prefer),
        ] {
            assert_eq!(parse(url).map(|t| t.mode()), Ok(mode), "{url}");
        }
        let why = parse("postgres://db/app?sslmode=allow").expect_err("refused");
        assert!(why.contains("`prefer`"), "{why}");
        let why = parse("postgres://db/app?sslmode=verify").expect_err("refused");
        assert!(why.contains("`verify-full`"), "{why}");
        // Other parameters tokio-postgres does not know stay its errors.
        let why = parse("postgres://db/app?sslcrl=/crl.pem").expect_err("refused");
        assert!(why.contains("the PostgreSQL URL is not valid"), "{why}");
    }

    #[test]
    fn a_unix_socket_uses_no_tls() {
        let target = parse("host=/run/postgresql user=app sslmode=prefer").expect("parses");
        assert_eq!(target.mode(), SslMode::Disable);
    }

    #[test]
    fn tls_files_are_given_once_and_whole_and_never_with_sslmode_disable() {
        let ca = PostgresTlsSettings {
            ca: Some("/etc/ca.pem".into()),
            ..PostgresTlsSettings::default()
        };
        let why = Target::parse("postgres://db/app?sslmode=disable", &ca).expect_err("refused");
        assert!(why.contains("sslmode=disable"), "{why}");
        let why =
            Target::parse("postgres://db/app?sslrootcert=/other.pem", &ca).expect_err("refused");
        assert!(why.contains("the CA is given twice"), "{why}");
        let why = parse("postgres://db/app?sslcert=/c.pem").expect_err("refused");
        assert!(why.contains("no `sslkey`"), "{why}");
        let half = PostgresTlsSettings {
            client_cert: Some("/c.pem".into()),
            ..PostgresTlsSettings::default()
        };
        let why = Target::parse("postgres://db/app", &half).expect_err("refused");
        assert!(why.contains("CRONGUARD_POSTGRES_CLIENT_KEY_FILE"), "{why}");
    }

    #[test]
    fn out_of_range_pool_settings_are_problems() {
        assert!(PoolOptions::default().problems().is_empty());
        let zero = PoolOptions {
            size: Some(0),
            connect_timeout: Some(Duration::ZERO),
            wait_timeout: Some(Duration::from_secs(61)),
        };
        let problems = zero.problems();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("pool size is 0"), "{}", problems[0]);
        assert!(
            problems[1].contains("postgres_connect_timeout"),
            "{}",
            problems[1]
        );
        assert_eq!(
            PoolOptions::default().deadline(None),
            Duration::from_secs(2)
        );
        let slow = PoolOptions {
            connect_timeout: Some(Duration::from_secs(10)),
            ..PoolOptions::default()
        };
        assert_eq!(slow.deadline(slow.connect_timeout), Duration::from_secs(10));
    }
}
