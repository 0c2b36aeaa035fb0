//! The connection of the Redis guards: one value, cheap to clone, that every job's guard sends its
//! scripts through, whatever the topology behind the URL.
//!
//! A server that cannot be reached when the scheduler starts is not a misconfiguration: the
//! connection is made at the first request that finds the server up (at most one attempt per
//! [`RETRY_CONNECT_AFTER`], so that a thousand jobs due during an outage do not each wait for a
//! connection timeout), and until then every request fails at once with the last connection error.
//! A URL that does not parse, a refused password or an unknown user is a misconfiguration: that is
//! [`Open::Misconfigured`], a start error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
use tokio::time::Instant;

use super::failure::{clone_error, is_unreachable, CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use super::sentinel::{self, SentinelLink, SentinelTarget};
use super::tls::{self, TlsFiles};

/// After a failed connection attempt, requests fail at once for this long before the next
/// attempt.
const RETRY_CONNECT_AFTER: Duration = Duration::from_secs(1);

/// What opening a connection found.
pub(crate) enum Open {
    /// Connected.
    Ready(RedisConn),
    /// The server did not answer; the connection is made when it does. The text says why.
    Unreachable(RedisConn, String),
    /// The URL or the credentials are wrong: the text says what to fix.
    Misconfigured(String),
}

/// How to reach the server(s) behind a URL.
#[derive(Clone)]
enum Target {
    Single(redis::Client),
    Sentinel(SentinelTarget),
    Cluster(Box<redis::cluster::ClusterClient>),
}

/// A connected link to the server(s).
#[derive(Clone)]
enum Link {
    Single(ConnectionManager),
    Sentinel(SentinelLink),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Link {
    fn as_conn(&mut self) -> &mut (dyn ConnectionLike + Send) {
        match self {
            Link::Single(conn) => conn,
            Link::Sentinel(conn) => conn,
            Link::Cluster(conn) => conn,
        }
    }
}

enum State {
    Connected(Link),
    /// Not connected; the last attempt failed at that instant with that error.
    Down(Option<(Instant, RedisError)>),
}

struct Shared {
    target: Target,
    state: Mutex<State>,
    /// Held by the one request that is connecting, so that the others do not connect too.
    connecting: tokio::sync::Mutex<()>,
}

/// The connection of the Redis guards (see the module documentation).
#[derive(Clone)]
pub(crate) struct RedisConn(Arc<Shared>);

impl RedisConn {
    fn new(target: Target, state: State) -> Self {
        RedisConn(Arc::new(Shared {
            target,
            state: Mutex::new(state),
            connecting: tokio::sync::Mutex::new(()),
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the state half-written (every write is
        // one assignment), so a poisoned lock is still good to use.
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `items` in groups whose keys (`key` of each) live on one node, in their order: one group
    /// on a single server.
    pub(crate) fn group_by_node<T>(&self, items: Vec<T>, key: impl Fn(&T) -> &str) -> Vec<Vec<T>> {
        match &self.0.target {
            Target::Single(_) | Target::Sentinel(_) => {
                let _ = key;
                vec![items]
            }
            Target::Cluster(_) => super::cluster::group_by_slot(items, key),
        }
    }

    /// The link, connecting first if need be.
    async fn link(&self) -> Result<Link, RedisError> {
        if let Some(result) = self.ready_or_recent_failure() {
            return result;
        }
        let _connecting = self.0.connecting.lock().await;
        // Another request may have connected, or failed, while this one waited.
        if let Some(result) = self.ready_or_recent_failure() {
            return result;
        }
        match open_link(&self.0.target).await {
            Ok(link) => {
                *self.state() = State::Connected(link.clone());
                tracing::info!("connected to Redis");
                Ok(link)
            }
            Err(e) => {
                let copy = clone_error(&e);
                *self.state() = State::Down(Some((Instant::now(), e)));
                Err(copy)
            }
        }
    }

    /// The cluster connection, connecting first if need be; `None` when the URL names no cluster.
    pub(crate) async fn cluster(
        &self,
    ) -> Result<Option<redis::cluster_async::ClusterConnection>, RedisError> {
        Ok(match self.link().await? {
            Link::Cluster(conn) => Some(conn),
            _ => None,
        })
    }

    fn ready_or_recent_failure(&self) -> Option<Result<Link, RedisError>> {
        match &*self.state() {
            State::Connected(link) => Some(Ok(link.clone())),
            State::Down(Some((at, e))) if at.elapsed() < RETRY_CONNECT_AFTER => {
                Some(Err(clone_error(e)))
            }
            State::Down(_) => None,
        }
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut link = self.link().await?;
            link.as_conn().req_packed_command(cmd).await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut link = self.link().await?;
            link.as_conn()
                .req_packed_commands(pipeline, offset, count)
                .await
        })
    }

    fn get_db(&self) -> i64 {
        match &self.0.target {
            Target::Single(client) => client.get_connection_info().redis_settings().db(),
            Target::Sentinel(target) => target.db(),
            Target::Cluster(_) => 0,
        }
    }
}

async fn open_link(target: &Target) -> Result<Link, RedisError> {
    match target {
        Target::Single(client) => {
            let config = redis::aio::ConnectionManagerConfig::new()
                .set_connection_timeout(Some(CONNECT_TIMEOUT))
                .set_response_timeout(Some(RESPONSE_TIMEOUT))
                .set_number_of_retries(2)
                .set_max_delay(Duration::from_secs(2));
            let mut conn = tokio::time::timeout(
                CONNECT_TIMEOUT + Duration::from_secs(1),
                client.get_connection_manager_with_config(config),
            )
            .await
            .map_err(|_| {
                RedisError::from((
                    ErrorKind::Io,
                    "no answer",
                    format!("within {CONNECT_TIMEOUT:?}"),
                ))
            })??;
            let _: String = redis::cmd("PING").query_async(&mut conn).await?;
            Ok(Link::Single(conn))
        }
        Target::Sentinel(target) => Ok(Link::Sentinel(sentinel::connect(target).await?)),
        Target::Cluster(client) => Ok(Link::Cluster(super::cluster::connect(client).await?)),
    }
}

fn target(url: &str, tls_files: &TlsFiles) -> Result<Target, String> {
    if url.starts_with(super::cluster::SCHEME) {
        tls::check_unused(tls_files)?;
        return super::cluster::client(url).map(|client| Target::Cluster(Box::new(client)));
    }
    if sentinel::is_sentinel_url(url) {
        tls::check_unused(tls_files)?;
        return sentinel::target(url).map(Target::Sentinel);
    }
    if tls::is_tls_url(url) {
        return tls::client(url, tls_files).map(Target::Single);
    }
    tls::check_unused(tls_files)?;
    redis::Client::open(url)
        .map(Target::Single)
        .map_err(|e| format!("the URL is not valid: {e}"))
}

/// Opens the connection to the server(s) of `url`, with the TLS files of a `rediss://` URL.
pub(crate) async fn open_with(url: &str, tls_files: &TlsFiles) -> Open {
    let target = match target(url, tls_files) {
        Ok(target) => target,
        Err(why) => return Open::Misconfigured(why),
    };
    match open_link(&target).await {
        Ok(link) => Open::Ready(RedisConn::new(target, State::Connected(link))),
        Err(e) => match tls::refused_certificate(&e) {
            Some(why) => Open::Misconfigured(why),
            None if is_unreachable(&e) => {
                let why = e.to_string();
                Open::Unreachable(
                    RedisConn::new(target, State::Down(Some((Instant::now(), e)))),
                    why,
                )
            }
            None => Open::Misconfigured(e.to_string()),
        },
    }
}

/// Connects to the server(s) of `url`, failing when they do not answer now.
pub(crate) async fn connect(url: &str) -> Result<RedisConn, String> {
    connect_with(url, &TlsFiles::default()).await
}

/// [`connect`], with the TLS files of a `rediss://` URL.
pub(crate) async fn connect_with(url: &str, tls_files: &TlsFiles) -> Result<RedisConn, String> {
    match open_with(url, tls_files).await {
        Open::Ready(conn) => Ok(conn),
        Open::Unreachable(_, why) => Err(why),
        Open::Misconfigured(why) => Err(why),
    }
}
