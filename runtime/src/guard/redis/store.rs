//! The Redis store of a job set: its settings (from the environment and the builder), opening
//! it (at start, with every problem reported at once, and for the command-line tool), and the
//! guards and the control feed built on its connections.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{
    open_with, Batcher, Open, RedisConn, RedisFeed, RedisGuard, ReplicaWait, Replication, TlsFiles,
};
use crate::error::{Problem, ProblemKind};
use crate::guard::feed::ControlFeed;
use crate::guard::Guard;
use crate::history::RecentHistory;
use crate::job::Job;
use crate::options::Overlap;

/// The settings of the `redis` guards, as given.
#[derive(Debug, Clone)]
pub(crate) struct RedisSettings {
    /// `CRONGUARD_REDIS_URL` or `REDIS_URL`, or `Builder::redis_url`.
    pub(crate) url: Option<String>,
    /// The first part of every key (`Builder::redis_prefix`).
    pub(crate) prefix: String,
    /// PEM files for `rediss://`.
    pub(crate) tls: RedisTlsSettings,
    /// Replicas every claim must reach, and how long it may wait for them.
    pub(crate) wait: Option<(u32, Duration)>,
}

/// The default first part of every Redis key.
pub(crate) const DEFAULT_PREFIX: &str = "cronguard";

impl RedisSettings {
    /// The settings the environment gives.
    pub(crate) fn from_env() -> Self {
        let env = crate::env::var;
        RedisSettings {
            url: env("CRONGUARD_REDIS_URL").or_else(|| env("REDIS_URL")),
            prefix: env("CRONGUARD_REDIS_PREFIX").unwrap_or_else(|| DEFAULT_PREFIX.to_owned()),
            tls: RedisTlsSettings {
                ca: env("CRONGUARD_REDIS_CA_FILE").map(PathBuf::from),
                client_cert: env("CRONGUARD_REDIS_CLIENT_CERT_FILE").map(PathBuf::from),
                client_key: env("CRONGUARD_REDIS_CLIENT_KEY_FILE").map(PathBuf::from),
            },
            wait: None,
        }
    }
}

/// The connections every `redis` job of a scheduler shares (or the command-line tool's).
pub(crate) struct RedisStore {
    conn: RedisConn,
    batcher: Arc<Batcher>,
    prefix: String,
    /// The replicas claims and renewals wait for, and their connections.
    wait: Option<Arc<Replication>>,
}

impl RedisStore {
    /// The guard of job `job` on these connections.
    pub(crate) fn guard(
        &self,
        job: &str,
        lease: Duration,
        overlap: Overlap,
        grace: Duration,
        history: RecentHistory,
    ) -> Arc<dyn Guard> {
        Arc::new(
            RedisGuard::new(
                self.conn.clone(),
                Arc::clone(&self.batcher),
                &self.prefix,
                job,
                lease,
                overlap,
            )
            .with_misfire_grace(grace)
            .keeping_history(history)
            .waiting_for_replicas(self.wait.clone()),
        )
    }

    /// The control feed of this store.
    pub(crate) fn feed(&self) -> Arc<dyn ControlFeed> {
        Arc::new(RedisFeed::new(self.conn.clone(), &self.prefix))
    }

    /// Opens the store of the command-line tool (with the TLS files of a `rediss://` URL, no
    /// waiting for replicas); the error says what is wrong and what to check.
    pub(crate) async fn open_for_admin(
        url: &str,
        prefix: &str,
        tls: &TlsFiles,
        within: Duration,
    ) -> Result<RedisStore, String> {
        let conn = match tokio::time::timeout(within, open_with(url, tls)).await {
            Ok(Open::Ready(conn)) => conn,
            Ok(Open::Unreachable(_, why)) => {
                return Err(format!(
                    "it cannot be reached ({why}); check the URL and that the server is up"
                ))
            }
            Ok(Open::Misconfigured(why)) => {
                return Err(format!("{why}; check the URL, the user and the password"))
            }
            Err(_) => {
                return Err(format!(
                    "it did not answer within {} s; check the URL and that the server is up",
                    within.as_secs()
                ))
            }
        };
        Ok(RedisStore {
            batcher: Batcher::new(conn.clone()),
            conn,
            prefix: prefix.to_owned(),
            wait: None,
        })
    }

    /// Opens the store of `jobs` at start; every problem goes to `problems`. A server that does
    /// not answer is a problem only when `required`: otherwise its jobs misfire until it answers.
    pub(crate) async fn open(
        settings: RedisSettings,
        required: bool,
        jobs: &[&Job],
        problems: &mut Vec<Problem>,
    ) -> Option<RedisStore> {
        let RedisSettings {
            url,
            prefix,
            tls,
            wait,
        } = settings;
        let wait = match wait.map(|(replicas, timeout)| ReplicaWait::check(replicas, timeout)) {
            None => None,
            Some(Ok(wait)) => Some(wait),
            Some(Err(why)) => {
                problems.push(Problem::new(ProblemKind::Other, None, why));
                return None;
            }
        };
        let Some(url) = url.as_deref() else {
            problems.push(Problem::new(ProblemKind::MissingUrl, crate::job::one_of(jobs), format!(
            "{} {} {} `lock = \"redis\"` but no Redis URL is set; set `CRONGUARD_REDIS_URL` (or `REDIS_URL`), or call `Builder::redis_url`",
            if jobs.len() == 1 { "job" } else { "jobs" },
            crate::job::quoted_names(jobs),
            if jobs.len() == 1 { "uses" } else { "use" },
        )));
            return None;
        };
        let tls = match tls.files() {
            Ok(files) => files,
            Err(why) => {
                problems.push(Problem::new(ProblemKind::GuardRefused, None, why));
                return None;
            }
        };
        let conn = match open_with(url, &tls).await {
            Open::Ready(conn) => conn,
            Open::Unreachable(_, why) if required => {
                problems.push(Problem::new(ProblemKind::Unreachable, None, format!(
                "Redis at `{}` cannot be reached ({why}); check `CRONGUARD_REDIS_URL` and that the server is up, or let the scheduler start without it (`Builder::require_guards_at_start(false)`, the default)",
                redact(url)
            )));
                return None;
            }
            Open::Unreachable(conn, why) => {
                tracing::warn!(
                    redis = %redact(url),
                    error = %why,
                    jobs = jobs.len(),
                    "Redis cannot be reached at start; the jobs that use it report their fires as misfires until it answers, and resume then without a restart"
                );
                conn
            }
            Open::Misconfigured(why) => {
                problems.push(Problem::new(ProblemKind::GuardRefused, None, format!(
                "Redis at `{}` cannot be used: {why}; check the URL, the user and the password in `CRONGUARD_REDIS_URL`",
                redact(url)
            )));
                return None;
            }
        };
        let wait = match wait {
            None => None,
            // Claims and renewals each wait on a connection of their own (see `Replication`).
            Some(wait) => Some(Replication::new(
                wait,
                open_waiting(url, &tls, "claims", problems).await?,
                open_waiting(url, &tls, "renewals", problems).await?,
            )),
        };
        Some(RedisStore {
            batcher: Batcher::new(conn.clone()),
            conn,
            prefix,
            wait,
        })
    }
}

/// A connection of its own for the `what` (claims, renewals) that wait for replicas; `None` when
/// the server refuses it (the problem is in `problems`).
async fn open_waiting(
    url: &str,
    tls: &TlsFiles,
    what: &str,
    problems: &mut Vec<Problem>,
) -> Option<RedisConn> {
    match open_with(url, tls).await {
        Open::Ready(conn) | Open::Unreachable(conn, _) => Some(conn),
        Open::Misconfigured(why) => {
            problems.push(Problem::new(ProblemKind::GuardRefused, None, format!(
                "Redis at `{}` refused the connection of the {what} that wait for replicas ({why}); check the URL, the user and the password in `CRONGUARD_REDIS_URL`",
                redact(url)
            )));
            None
        }
    }
}

/// The TLS files of the `redis` guards' connection, as given.
#[derive(Debug, Clone, Default)]
pub(crate) struct RedisTlsSettings {
    pub(crate) ca: Option<PathBuf>,
    pub(crate) client_cert: Option<PathBuf>,
    pub(crate) client_key: Option<PathBuf>,
}

impl RedisTlsSettings {
    fn files(self) -> Result<TlsFiles, String> {
        let client = match (self.client_cert, self.client_key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => return Err("`CRONGUARD_REDIS_CLIENT_CERT_FILE` is set but `CRONGUARD_REDIS_CLIENT_KEY_FILE` is not; set both (the client certificate and its key), or neither".to_owned()),
            (None, Some(_)) => return Err("`CRONGUARD_REDIS_CLIENT_KEY_FILE` is set but `CRONGUARD_REDIS_CLIENT_CERT_FILE` is not; set both (the client certificate and its key), or neither".to_owned()),
        };
        Ok(TlsFiles {
            ca: self.ca,
            client,
        })
    }
}

/// A Redis URL without its passwords, for messages: the password of `user:password@host` (also
/// one with `@`, `/` or `?` in it that was not percent-encoded) and the values of the `pass`,
/// `password` and `sentinel_password` query parameters (`redis+unix:///run/redis.sock?pass=...`,
/// `redis+sentinel://...?sentinel_password=...`) become `***`.
pub(crate) fn redact(url: &str) -> String {
    // Query parameters first, so that an `@` in a masked value is gone before the userinfo is
    // looked for.
    let url = match url.split_once('?') {
        Some((base, query)) => {
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((key, _))
                        if key.eq_ignore_ascii_case("pass")
                            || key.eq_ignore_ascii_case("password")
                            || key.eq_ignore_ascii_case("sentinel_password") =>
                    {
                        format!("{key}=***")
                    }
                    _ => param.to_owned(),
                })
                .collect();
            format!("{base}?{}", params.join("&"))
        }
        None => url.to_owned(),
    };
    // The userinfo ends at the last `@`: a password may hold `@`, `/` or `?` unencoded.
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme + 3 => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url,
            }
        }
        _ => url,
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redact_hides_every_form_of_password() {
        let cases = [
            (
                "redis://app:s3cret@127.0.0.1:6379/0",
                "redis://app:***@127.0.0.1:6379/0",
            ),
            (
                "rediss://:s3cret@cache.example:6380",
                "rediss://:***@cache.example:6380",
            ),
            ("redis://app@127.0.0.1/", "redis://app@127.0.0.1/"),
            ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/"),
            // `@`, `/` and `?` in a password that was not percent-encoded.
            (
                "redis://app:s3@c/r?et@127.0.0.1/",
                "redis://app:***@127.0.0.1/",
            ),
            (
                "redis+unix:///run/redis.sock?pass=s3cret",
                "redis+unix:///run/redis.sock?pass=***",
            ),
            (
                "unix:///run/redis.sock?db=2&pass=s3cret",
                "unix:///run/redis.sock?db=2&pass=***",
            ),
            (
                "redis+unix:///run/redis.sock?password=s3cret&db=1",
                "redis+unix:///run/redis.sock?password=***&db=1",
            ),
            (
                "redis+unix:///run/redis.sock?user=app&PASS=s3@cret",
                "redis+unix:///run/redis.sock?user=app&PASS=***",
            ),
            (
                "redis://app:s3cret@127.0.0.1/0?protocol=resp3&password=s3cret",
                "redis://app:***@127.0.0.1/0?protocol=resp3&password=***",
            ),
            (
                "redis+sentinel://app:s3cret@10.0.0.1:26379,10.0.0.2:26379/mymaster/0?sentinel_password=s3cret",
                "redis+sentinel://app:***@10.0.0.1:26379,10.0.0.2:26379/mymaster/0?sentinel_password=***",
            ),
            (
                "redis+sentinel://127.0.0.1:26379/mymaster?sentinel_password=s3@c",
                "redis+sentinel://127.0.0.1:26379/mymaster?sentinel_password=***",
            ),
            // Only whole parameter names: `bypass=` is not a password.
            (
                "redis+unix:///x.sock?bypass=1",
                "redis+unix:///x.sock?bypass=1",
            ),
        ];
        for (url, expected) in cases {
            let shown = redact(url);
            assert_eq!(shown, expected, "{url}");
            assert!(!shown.contains("s3"), "{url} -> {shown}");
        }
    }
}
