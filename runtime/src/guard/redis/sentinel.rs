//! `redis+sentinel://`: the Redis guard on the primary that Redis Sentinel names.
//!
//! URL: `redis+sentinel://[user:password@]host1[:port1][,host2[:port2]...]/<master name>[/<db>]`,
//! the sentinels' addresses (port 26379 when left out) and the name they monitor the primary
//! under. The user and password are those of the Redis servers (the primary and its replicas);
//! sentinels that require a password of their own (`requirepass` in the sentinel's
//! configuration) take it from the query parameters `sentinel_username` and `sentinel_password`.
//!
//! The link holds one connection to the primary. The primary is resolved by asking the sentinels,
//! in the URL's order, `SENTINEL get-master-addr-by-name`, and the node named is asked `ROLE`
//! before it is used, as a sentinel's answer can be stale. A request that fails because the
//! primary cannot be reached (a dropped connection, a timeout: a frozen primary) or because the
//! node refuses writes as no primary would (`READONLY`: the old primary, demoted after a
//! failover; `NOREPLICAS`: an old primary back from a freeze, cut off from its replicas, where
//! `min-replicas-to-write` is set) drops the connection, and the primary is resolved again — at most once per [`RESOLVE_EVERY`], for every
//! job at once; in between, requests fail at once with the last error, and the jobs' models retry
//! them. A request refused with `READONLY` or `NOREPLICAS` was not carried out, so it is sent once
//! more to the new primary right away. Every request times out after [`RESPONSE_TIMEOUT`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ErrorKind, IntoConnectionInfo, Pipeline,
    RedisConnectionInfo, RedisError, RedisFuture, Value,
};
use tokio::time::Instant;

/// The port of a sentinel whose address has none.
const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// How long asking one sentinel may take (connecting, and its answer).
const SENTINEL_TIMEOUT: Duration = Duration::from_millis(500);

/// How long connecting to the primary may take, and `ROLE` on it.
const PRIMARY_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a request may wait for its reply.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The primary is resolved again at most this often.
const RESOLVE_EVERY: Duration = Duration::from_secs(1);

/// How long resolving the primary may take in all, whatever the number of sentinels.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// Whether `url` names its servers through sentinels.
pub(crate) fn is_sentinel_url(url: &str) -> bool {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    scheme.eq_ignore_ascii_case("redis+sentinel") || scheme.eq_ignore_ascii_case("rediss+sentinel")
}

/// The sentinels of a URL and what to ask them.
#[derive(Clone)]
pub(crate) struct SentinelTarget {
    sentinels: Vec<(String, u16)>,
    master: String,
    /// The user, password, database and protocol of the Redis servers.
    redis: RedisConnectionInfo,
    /// The user and password of the sentinels.
    sentinel: RedisConnectionInfo,
}

impl SentinelTarget {
    /// The database number of the URL.
    pub(crate) fn db(&self) -> i64 {
        self.redis.db()
    }
}

/// `%XX` escapes of a URL component decoded.
fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    "a `%` escape in the URL is not followed by two hex digits".to_owned()
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "a `%` escape in the URL is not UTF-8".to_owned())
}

/// Parses a `redis+sentinel://` URL (see the module documentation).
pub(crate) fn target(url: &str) -> Result<SentinelTarget, String> {
    const FORM: &str = "the form is `redis+sentinel://[user:password@]host1:port1,host2:port2/<master name>[/<db>]`";
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("the URL is not valid: {FORM}"));
    };
    if scheme.eq_ignore_ascii_case("rediss+sentinel") {
        return Err(
            "`rediss+sentinel://` (Sentinel over TLS) is not supported; use `redis+sentinel://` on a trusted network, or a `rediss://` URL of the primary".to_owned(),
        );
    }
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    // The userinfo ends at the last `@`: a password may hold `@` or `/` unencoded.
    let (userinfo, rest) = match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut sentinels = Vec::new();
    for host in hosts.split(',').filter(|h| !h.is_empty()) {
        let bad_port = || format!("the sentinel address `{host}` has no valid port; {FORM}");
        let (name, port) = match host.strip_prefix('[') {
            // `[v6 address]` or `[v6 address]:port`.
            Some(bracketed) => match bracketed.split_once(']') {
                Some((name, "")) => (name, None),
                Some((name, port)) => (name, Some(port.strip_prefix(':').ok_or_else(bad_port)?)),
                None => return Err(bad_port()),
            },
            None => match host.split_once(':') {
                Some((name, port)) => (name, Some(port)),
                None => (host, None),
            },
        };
        let port = match port {
            Some(port) => port.parse::<u16>().map_err(|_| bad_port())?,
            None => DEFAULT_SENTINEL_PORT,
        };
        sentinels.push((name.to_owned(), port));
    }
    if sentinels.is_empty() {
        return Err(format!("the URL names no sentinel; {FORM}"));
    }
    let mut parts = path.split('/').filter(|p| !p.is_empty());
    let master = match parts.next() {
        Some(master) => percent_decode(master)?,
        None => return Err(format!("the URL names no master; {FORM}")),
    };
    let db = parts.next().unwrap_or("0");
    if parts.next().is_some() {
        return Err(format!(
            "the URL's path has more than a master name and a database; {FORM}"
        ));
    }
    let mut sentinel = RedisConnectionInfo::default();
    let mut rest_query = Vec::new();
    for param in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match param.split_once('=') {
            Some(("sentinel_username", v)) => sentinel = sentinel.set_username(percent_decode(v)?),
            Some(("sentinel_password", v)) => sentinel = sentinel.set_password(percent_decode(v)?),
            _ => rest_query.push(param),
        }
    }
    // The servers' settings are parsed as redis-rs parses a plain URL with the same userinfo,
    // database and parameters, so that both forms mean the same.
    let plain = format!(
        "redis://{}127.0.0.1/{db}{}{}",
        userinfo.map(|u| format!("{u}@")).unwrap_or_default(),
        if rest_query.is_empty() { "" } else { "?" },
        rest_query.join("&")
    );
    let redis = plain
        .as_str()
        .into_connection_info()
        .map_err(|e| format!("the URL is not valid ({e}); {FORM}"))?
        .redis_settings()
        .clone();
    Ok(SentinelTarget {
        sentinels,
        master,
        redis,
        sentinel,
    })
}

fn error(kind: ErrorKind, what: &'static str, detail: String) -> RedisError {
    RedisError::from((kind, what, detail))
}

async fn connection(
    host: &str,
    port: u16,
    settings: &RedisConnectionInfo,
    timeout: Duration,
    response_timeout: Duration,
) -> Result<MultiplexedConnection, RedisError> {
    let info = ConnectionAddr::Tcp(host.to_owned(), port)
        .into_connection_info()?
        .set_redis_settings(settings.clone());
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(response_timeout));
    let client = redis::Client::open(info)?;
    tokio::time::timeout(
        timeout + Duration::from_millis(100),
        client.get_multiplexed_async_connection_with_config(&config),
    )
    .await
    .map_err(|_| {
        error(
            ErrorKind::Io,
            "no answer",
            format!("from {host}:{port} within {timeout:?}"),
        )
    })?
}

/// [`resolve_once`] within [`RESOLVE_TIMEOUT`].
async fn resolve(
    target: &SentinelTarget,
) -> Result<(MultiplexedConnection, String, u16), RedisError> {
    tokio::time::timeout(RESOLVE_TIMEOUT, resolve_once(target))
        .await
        .map_err(|_| {
            error(
                ErrorKind::Io,
                "no primary found",
                format!(
                    "the sentinels and the primary of `{}` did not answer within {RESOLVE_TIMEOUT:?}",
                    target.master
                ),
            )
        })?
}

/// The primary that the sentinels name, connected, and checked to be a master.
async fn resolve_once(
    target: &SentinelTarget,
) -> Result<(MultiplexedConnection, String, u16), RedisError> {
    let mut last_error = None;
    let mut unknown_master = 0;
    // Primaries named by one sentinel and found unusable: usually every sentinel names the same
    // one, which is not worth another connection timeout.
    let mut tried: Vec<(String, u16)> = Vec::new();
    for (host, port) in &target.sentinels {
        let answer: Result<Option<(String, u16)>, RedisError> = async {
            let mut sentinel = connection(
                host,
                *port,
                &target.sentinel,
                SENTINEL_TIMEOUT,
                SENTINEL_TIMEOUT,
            )
            .await?;
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(&target.master)
                .query_async(&mut sentinel)
                .await
        }
        .await;
        let (primary_host, primary_port) = match answer {
            Ok(Some(addr)) => addr,
            Ok(None) => {
                unknown_master += 1;
                continue;
            }
            Err(e)
                if e.kind() == ErrorKind::AuthenticationFailed
                    || matches!(e.code(), Some("NOAUTH" | "WRONGPASS")) =>
            {
                return Err(error(
                    ErrorKind::AuthenticationFailed,
                    "the sentinel refused the password",
                    format!(
                        "sentinel {host}:{port}: {e}; give the sentinels' password as the URL parameter `sentinel_password`"
                    ),
                ));
            }
            Err(e) => {
                last_error = Some(e);
                continue;
            }
        };
        if tried.contains(&(primary_host.clone(), primary_port)) {
            continue;
        }
        tried.push((primary_host.clone(), primary_port));
        let checked = async {
            let mut conn = connection(
                &primary_host,
                primary_port,
                &target.redis,
                PRIMARY_CONNECT_TIMEOUT,
                RESPONSE_TIMEOUT,
            )
            .await?;
            let role: Value = tokio::time::timeout(
                PRIMARY_CONNECT_TIMEOUT,
                redis::cmd("ROLE").query_async(&mut conn),
            )
            .await
            .map_err(|_| {
                error(
                    ErrorKind::Io,
                    "no answer to ROLE",
                    format!(
                        "from {primary_host}:{primary_port} within {PRIMARY_CONNECT_TIMEOUT:?}"
                    ),
                )
            })??;
            Ok::<_, RedisError>((conn, is_master(&role)))
        }
        .await;
        match checked {
            Ok((conn, true)) => return Ok((conn, primary_host, primary_port)),
            Ok((_, false)) => {
                last_error = Some(error(
                    ErrorKind::Io,
                    "not a primary",
                    format!(
                        "sentinel {host}:{port} named {primary_host}:{primary_port} as the primary of `{}`, but it is a replica (a failover is under way)",
                        target.master
                    ),
                ));
            }
            // A wrong password or user is the same on every node: a misconfiguration.
            Err(e) if !super::failure::is_unreachable(&e) => return Err(e),
            Err(e) => last_error = Some(e),
        }
    }
    if unknown_master > 0 && last_error.is_none() {
        return Err(error(
            ErrorKind::InvalidClientConfig,
            "unknown master name",
            format!(
                "no sentinel monitors a master named `{}`; check the name in the URL (`SENTINEL masters` on a sentinel lists them)",
                target.master
            ),
        ));
    }
    Err(last_error.unwrap_or_else(|| {
        error(
            ErrorKind::Io,
            "no sentinel answered",
            format!("the sentinels of `{}`", target.master),
        )
    }))
}

fn is_master(role: &Value) -> bool {
    let first = match role {
        Value::Array(items) => items.first(),
        _ => None,
    };
    match first {
        Some(Value::BulkString(s)) => s.as_slice() == b"master",
        Some(Value::SimpleString(s)) => s == "master",
        _ => false,
    }
}

/// Whether `e` says that the connected node is no longer the primary, or cannot be reached.
fn needs_new_primary(e: &RedisError) -> bool {
    is_readonly(e) || super::failure::is_unreachable(e)
}

/// The error codes of a node that refuses writes because it is not (or no longer safely) the
/// primary: `READONLY` from a replica (an old primary demoted after a failover), `NOREPLICAS`
/// from a primary cut off from its replicas with `min-replicas-to-write` set (an old primary
/// that comes back before the sentinels demote it). Neither carried out the request.
const NOT_PRIMARY: [&str; 2] = ["READONLY", "NOREPLICAS"];

fn is_readonly_reply(e: &redis::ServerError) -> bool {
    NOT_PRIMARY.contains(&e.code())
        || e.details()
            .is_some_and(|d| NOT_PRIMARY.iter().any(|code| d.contains(code)))
}

fn is_readonly(e: &RedisError) -> bool {
    // A write inside a script fails with the same codes, but the error reaches here as the
    // script's, with the code in its text.
    e.code().is_some_and(|code| NOT_PRIMARY.contains(&code)) || {
        let text = e.to_string();
        NOT_PRIMARY.iter().any(|code| text.contains(code))
    }
}

#[derive(Clone)]
struct Primary {
    conn: MultiplexedConnection,
    /// Counts the connections made, so that a failed request drops only the connection it used.
    generation: u64,
}

struct Inner {
    target: SentinelTarget,
    primary: Mutex<Option<Primary>>,
    /// When the primary was last resolved, and the error if that failed.
    last_resolve: Mutex<Option<(Instant, Option<RedisError>)>>,
    /// Held by the one request that resolves the primary.
    resolving: tokio::sync::Mutex<()>,
    generation: Mutex<u64>,
}

/// A connection to the primary that the sentinels name (see the module documentation).
#[derive(Clone)]
pub(crate) struct SentinelLink(Arc<Inner>);

/// A poisoned lock still holds a whole value here: every write is one assignment.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn copy(e: &RedisError) -> RedisError {
    super::failure::clone_error(e)
}

/// Resolves the primary of `target` and connects to it.
pub(crate) async fn connect(target: &SentinelTarget) -> Result<SentinelLink, RedisError> {
    let (conn, host, port) = resolve(target).await?;
    tracing::info!(primary = %format!("{host}:{port}"), master = %target.master, "connected to the Redis primary named by the sentinels");
    Ok(SentinelLink(Arc::new(Inner {
        target: target.clone(),
        primary: Mutex::new(Some(Primary {
            conn,
            generation: 0,
        })),
        last_resolve: Mutex::new(Some((Instant::now(), None))),
        resolving: tokio::sync::Mutex::new(()),
        generation: Mutex::new(0),
    })))
}

impl SentinelLink {
    async fn primary(&self) -> Result<Primary, RedisError> {
        if let Some(primary) = lock(&self.0.primary).clone() {
            return Ok(primary);
        }
        let _resolving = self.0.resolving.lock().await;
        if let Some(primary) = lock(&self.0.primary).clone() {
            return Ok(primary);
        }
        if let Some((at, last)) = &*lock(&self.0.last_resolve) {
            if at.elapsed() < RESOLVE_EVERY {
                return Err(match last {
                    Some(e) => copy(e),
                    None => error(
                        ErrorKind::Io,
                        "no connection to the Redis primary",
                        "it was lost; the sentinels are asked again within a second".to_owned(),
                    ),
                });
            }
        }
        let resolved = resolve(&self.0.target).await;
        let now = Instant::now();
        match resolved {
            Ok((conn, host, port)) => {
                let generation = {
                    let mut g = lock(&self.0.generation);
                    *g += 1;
                    *g
                };
                let primary = Primary { conn, generation };
                *lock(&self.0.primary) = Some(primary.clone());
                *lock(&self.0.last_resolve) = Some((now, None));
                tracing::info!(primary = %format!("{host}:{port}"), master = %self.0.target.master, "connected to the Redis primary named by the sentinels");
                Ok(primary)
            }
            Err(e) => {
                let returned = copy(&e);
                *lock(&self.0.last_resolve) = Some((now, Some(e)));
                Err(returned)
            }
        }
    }

    /// Drops the connection of `generation` after `e`, when `e` says it no longer reaches the
    /// primary.
    fn failed(&self, generation: u64, e: &RedisError) {
        if needs_new_primary(e) && self.drop_primary(generation) {
            tracing::warn!(error = %e, master = %self.0.target.master, "the Redis primary failed; asking the sentinels for the primary again");
        }
    }

    /// Drops the connection of `generation`, unless another request replaced it already;
    /// `true` when it was dropped here.
    fn drop_primary(&self, generation: u64) -> bool {
        let mut primary = lock(&self.0.primary);
        if primary.as_ref().is_some_and(|p| p.generation == generation) {
            *primary = None;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
impl SentinelLink {
    /// Points the link at the node on 127.0.0.1:`port` as if the sentinels had named it, and
    /// lets the next failure ask the sentinels at once.
    pub(super) async fn point_at(&self, port: u16) -> Result<(), RedisError> {
        let conn = connection(
            "127.0.0.1",
            port,
            &self.0.target.redis,
            PRIMARY_CONNECT_TIMEOUT,
            RESPONSE_TIMEOUT,
        )
        .await?;
        *lock(&self.0.primary) = Some(Primary {
            conn,
            generation: u64::MAX,
        });
        *lock(&self.0.last_resolve) = None;
        Ok(())
    }

    /// How many times the primary was resolved since the link was made.
    pub(super) fn resolutions(&self) -> u64 {
        *lock(&self.0.generation)
    }
}

impl ConnectionLike for SentinelLink {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut primary = self.primary().await?;
            let result = primary.conn.req_packed_command(cmd).await;
            let readonly = match &result {
                // A server's error reply comes back as a value; the caller turns it into an error.
                Ok(Value::ServerError(e)) => is_readonly_reply(e),
                Ok(_) => return result,
                Err(e) => {
                    self.failed(primary.generation, e);
                    is_readonly(e)
                }
            };
            if !readonly {
                return result;
            }
            if self.drop_primary(primary.generation) {
                tracing::warn!(master = %self.0.target.master, "the Redis node named as the primary refuses writes (`READONLY` or `NOREPLICAS`); asking the sentinels for the primary again");
            }
            // Refused as by no primary, the request was not carried out: it goes to the new
            // primary at once, when the sentinels may be asked again.
            let Ok(mut next) = self.primary().await else {
                return result;
            };
            let retried = next.conn.req_packed_command(cmd).await;
            match &retried {
                Ok(Value::ServerError(e)) if is_readonly_reply(e) => {
                    self.drop_primary(next.generation);
                }
                Err(e) => {
                    self.failed(next.generation, e);
                }
                Ok(_) => {}
            }
            retried
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut primary = self.primary().await?;
            let result = primary
                .conn
                .req_packed_commands(pipeline, offset, count)
                .await;
            match &result {
                Ok(values)
                    if values
                        .iter()
                        .any(|v| matches!(v, Value::ServerError(e) if is_readonly_reply(e))) =>
                {
                    self.drop_primary(primary.generation);
                }
                Ok(_) => {}
                Err(e) => self.failed(primary.generation, e),
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.0.target.db()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_part_of_the_url() {
        let t = target("redis+sentinel://app:p%40ss@10.0.0.1:26380,sentinel-b,[::1]:26381/my%20master/3?sentinel_password=s%2Fp&protocol=resp3")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t.sentinels,
            vec![
                ("10.0.0.1".to_owned(), 26380),
                ("sentinel-b".to_owned(), DEFAULT_SENTINEL_PORT),
                ("::1".to_owned(), 26381)
            ]
        );
        assert_eq!(t.master, "my master");
        assert_eq!(t.db(), 3);
        assert_eq!(t.redis.username(), Some("app"));
        assert_eq!(t.redis.password(), Some("p@ss"));
        assert_eq!(t.redis.protocol(), redis::ProtocolVersion::RESP3);
        assert_eq!(t.sentinel.password(), Some("s/p"));
        assert_eq!(t.sentinel.username(), None);

        let t =
            target("redis+sentinel://127.0.0.1:26379/mymaster").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.db(), 0);
        assert_eq!(t.redis.password(), None);
        assert_eq!(t.sentinel.password(), None);
    }

    #[test]
    fn a_bad_url_says_the_form() {
        for url in [
            "redis+sentinel:///mymaster",
            "redis+sentinel://127.0.0.1:26379",
            "redis+sentinel://127.0.0.1:26379/",
            "redis+sentinel://127.0.0.1:x/mymaster",
            "redis+sentinel://127.0.0.1/mymaster/0/extra",
        ] {
            let err = target(url).err().unwrap_or_else(|| panic!("{url} parsed"));
            assert!(
                err.contains("redis+sentinel://[user:password@]"),
                "{url}: {err}"
            );
        }
        let err = target("rediss+sentinel://127.0.0.1/mymaster")
            .err()
            .unwrap_or_default();
        assert!(err.contains("not supported"), "{err}");
    }
}
