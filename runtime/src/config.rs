//! Settings: from the environment, overridable in code, checked against the jobs at start.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::env::var as env;
use crate::error::{Error, Problem, ProblemKind};
use crate::events::{Event, EventSink, Hook};
use crate::executor::{self, Shared};
use crate::guard::{Guard, GuardSpec};
use crate::guards::{GuardSettings, Stores};
use crate::handle::Cronguard;
use crate::job::{registered, Job, JobDefaults};
use crate::options::Lock;
use crate::selection::Selection;
use crate::state::States;

/// The default time running jobs get to finish at shutdown.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts the scheduler with every `#[scheduled]` job of the binary and settings from the
/// environment. The same as `cronguard::builder().start()`.
///
/// Environment: `CRONGUARD_LOCK_DIR` (lock dir of `file` guards; default a folder private to
/// this user: `$XDG_RUNTIME_DIR/cronguard`, else `/run/cronguard` for root, else
/// `<system temp dir>/cronguard-<uid>`), `CRONGUARD_REDIS_URL`, else `CRONGUARD_REDIS_URL_FILE`,
/// else `REDIS_URL` (`redis` guards: `redis://`, `rediss://` with the `redis-tls` feature,
/// `redis+sentinel://`), `CRONGUARD_REDIS_PREFIX` (the first part of every Redis key, see
/// [`Builder::redis_prefix`]; default `cronguard`), `CRONGUARD_REDIS_CA_FILE`,
/// `CRONGUARD_REDIS_CLIENT_CERT_FILE` and `CRONGUARD_REDIS_CLIENT_KEY_FILE` (PEM files for
/// `rediss://`, see [`Builder::redis_tls_ca`]), `CRONGUARD_POSTGRES_URL`, else
/// `CRONGUARD_POSTGRES_URL_FILE`, else `DATABASE_URL` (`postgres` guards; TLS as its `sslmode`
/// says, with the `postgres-tls` feature), `CRONGUARD_POSTGRES_CA_FILE`,
/// `CRONGUARD_POSTGRES_CLIENT_CERT_FILE` and `CRONGUARD_POSTGRES_CLIENT_KEY_FILE` (PEM files, see
/// `Builder::postgres_tls_ca`), `CRONGUARD_POSTGRES_POOL_SIZE` (default 8),
/// `CRONGUARD_POSTGRES_SCHEMA` (default `cronguard`), `CRONGUARD_INSTANCE` (this process's name
/// in events; default `hostname:pid`), `CRONGUARD_JOBS` (see [`Builder::select_jobs`]),
/// `CRONGUARD_JOB__<JOB>__<KEY>` (overrides of the jobs' settings, see
/// [`Builder::overrides_from`]) and `CRONGUARD_OVERRIDES_FILE` (a TOML file of overrides, feature
/// `toml`).
///
/// `CRONGUARD_REDIS_URL_FILE` and `CRONGUARD_POSTGRES_URL_FILE` name a file that holds the URL
/// (the `_FILE` convention of Docker and Kubernetes secrets), so that its password is in no
/// variable: the file's contents without the surrounding whitespace (its trailing newline) are
/// the URL. Setting a variable and its `_FILE` twin, or a file that cannot be read, is empty or
/// holds more than one line, is a start error of the jobs of that guard (unless
/// [`Builder::redis_url`] or [`Builder::postgres_url`] gives the URL). The command-line tool
/// `cronguard` reads the same variables.
///
/// # Errors
///
/// [`Error::Config`] listing every problem: two jobs with one name, a job with invalid settings,
/// an override that names no job or setting or gives a value the attribute would refuse,
/// an unusable lock dir, a `redis` or `postgres` job without a URL, a `custom:<name>` guard that
/// was not registered.
pub async fn start() -> Result<Cronguard, Error> {
    builder().start().await
}

/// A [`Builder`] with the settings of the environment (see [`start`]).
pub fn builder() -> Builder {
    Builder::from_env()
}

/// Settings of the scheduler, and jobs defined in code.
///
/// ```no_run
/// use std::time::Duration;
/// use cronguard::{Job, Schedule};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let handle = cronguard::builder()
///     .lock_dir("/var/lock/myservice")
///     .shutdown_timeout(Duration::from_secs(10))
///     .job(Job::new("cleanup", Schedule::every(Duration::from_secs(60))?).run(|_ctx| async {}))
///     .on_event(|event| println!("{} {}", event.run_key, event.kind.name()))
///     .start()
///     .await?;
/// handle.run_until_shutdown_signal().await?;
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct Builder {
    /// The settings of every kind of guard; each backend reads its own.
    guards: GuardSettings,
    state_dir: Option<PathBuf>,
    history: bool,
    standby: Option<Duration>,
    claim_ahead: Duration,
    ownership: bool,
    instance: Option<String>,
    clock: Clock,
    jobs: Vec<Job>,
    include_registered: bool,
    hooks: Vec<Hook>,
    shutdown_timeout: Duration,
    /// `CRONGUARD_JOBS`, or [`Builder::select_jobs`].
    selection: Option<String>,
    states: States,
    /// `CRONGUARD_JOB__*` and `CRONGUARD_OVERRIDES_FILE`, or [`Builder::overrides_from`] and
    /// `Builder::overrides_file`.
    overrides: crate::overrides::Inputs,
}

impl Builder {
    /// Settings from the environment only.
    pub fn from_env() -> Self {
        Builder {
            guards: GuardSettings::from_env(),
            state_dir: env("CRONGUARD_STATE_DIR").map(PathBuf::from),
            history: false,
            standby: None,
            claim_ahead: Duration::ZERO,
            ownership: true,
            instance: env("CRONGUARD_INSTANCE"),
            clock: Clock::system(),
            jobs: Vec::new(),
            include_registered: true,
            hooks: Vec::new(),
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            states: States::default(),
            selection: env("CRONGUARD_JOBS"),
            overrides: crate::overrides::Inputs::from_env(),
        }
    }

    /// Takes the overrides of the jobs' settings from `vars` instead of the process environment
    /// (docs/guide/overrides.md): each entry named `CRONGUARD_JOB__<JOB>__<KEY>` (see
    /// [`override_variable`](crate::override_variable)) overrides the setting `<KEY>` of job
    /// `<JOB>` at start; other entries are ignored (except a misspelt override such as
    /// `CRONGUARD_JOB_X__CRON`, which is refused), so `std::env::vars()` or a map of a
    /// configuration system can be passed whole. The overrides file (`Builder::overrides_file`,
    /// `CRONGUARD_OVERRIDES_FILE`) is not affected; for a setting that both give, these values
    /// win.
    ///
    /// The settings that can be overridden are the schedule (`cron`, `every`, `tz`), `enabled`
    /// and the limits (`lease`, `history`, `max_instances`, `overlap`, `coalesce`,
    /// `misfire_grace`, `timeout`, `retries`, `backoff`, `jitter`, `standby`), with the values and
    /// checks of the `#[scheduled]` attribute. `lock` cannot be overridden (changing a job's guard
    /// changes across which processes each fire starts at most once), nor `name`. A variable that
    /// names no job, no setting, or a value the attribute would refuse makes
    /// [`start`](Builder::start) fail with [`ProblemKind::InvalidOverride`], naming the variable
    /// and, for a typo, the job or setting it probably meant. A blank value sets nothing.
    /// [`JobStatus::overrides`](crate::JobStatus::overrides) lists what each job got, and from
    /// where.
    ///
    /// ```
    /// use cronguard::{scheduled, ProblemKind};
    ///
    /// #[scheduled(every = "1h", name = "reports::nightly")]
    /// async fn nightly() {}
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let handle = cronguard::builder()
    ///     .overrides_from([("CRONGUARD_JOB__REPORTS__NIGHTLY__EVERY", "10m")])
    ///     .start()
    ///     .await?;
    /// let status = handle.monitor().job("reports::nightly").expect("registered");
    /// assert_eq!(status.schedule, "every 10m");
    /// assert_eq!(status.overrides[0].setting, "every");
    /// handle.shutdown().await;
    ///
    /// let typo = cronguard::builder()
    ///     .overrides_from([("CRONGUARD_JOB__REPORTS__NIGTHLY__EVERY", "10m")])
    ///     .start()
    ///     .await;
    /// let Err(cronguard::Error::Config { problems }) = typo else { panic!("no such job") };
    /// assert_eq!(problems[0].kind(), ProblemKind::InvalidOverride);
    /// assert!(problems[0]
    ///     .message()
    ///     .contains("did you mean `CRONGUARD_JOB__REPORTS__NIGHTLY__EVERY` (job `reports::nightly`)?"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn overrides_from<K, V>(mut self, vars: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.overrides
            .set_vars(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Reads overrides of the jobs' settings from the TOML file at `path` at start, instead of
    /// the file `CRONGUARD_OVERRIDES_FILE` names (docs/guide/overrides.md). The file holds
    /// `[[job]]` tables with the keys of [`JobConfig`](crate::JobConfig), each overriding the
    /// settings of the job whose `name` it gives:
    ///
    /// ```toml
    /// [[job]]
    /// name = "reports::nightly"
    /// cron = "0 0 3 * * *"   # the job's own tz still applies
    ///
    /// [[job]]
    /// name = "cleanup"
    /// enabled = false
    /// ```
    ///
    /// The settings that can be overridden, and the checks, are those of
    /// [`overrides_from`](Builder::overrides_from); a problem names the file and line. A value
    /// that an environment variable also gives is the variable's. A file that cannot be read is
    /// a start error.
    #[cfg(feature = "toml")]
    #[cfg_attr(docsrs, doc(cfg(feature = "toml")))]
    pub fn overrides_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.overrides.set_file(path.into());
        self
    }

    /// Which jobs this replica runs (docs/guide/selecting-jobs.md): patterns
    /// separated by commas, `*` matching any run of characters, `!` excluding — for example
    /// `billing::*,!billing::slow_*`. The jobs left out are still listed and watched by the
    /// health check, but never claimed or run here. Read from `CRONGUARD_JOBS` by default; an
    /// empty pattern is a start error, a pattern that matches no job a warning.
    pub fn select_jobs(mut self, patterns: impl Into<String>) -> Self {
        self.selection = Some(patterns.into());
        self
    }

    /// The folder of the `file` guards' lock files: created (mode 0700) if missing; it must
    /// belong to this process's user and be writable by nobody else, and must not be a link.
    pub fn lock_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.guards.lock_dir = Some(dir.into());
        self
    }

    /// The folder where `local` jobs keep, across restarts, the newest fire that started or was
    /// reported (docs/guide/downtime.md), as systemd timers with `Persistent=true` do: a process
    /// that starts again catches up the fires it missed while it was down that are still inside
    /// their misfire grace, and reports the older ones. Read from `CRONGUARD_STATE_DIR` by default;
    /// created (mode 0700) if missing, with the lock dir's rules (this user's, writable by
    /// nobody else, no link), and used by one process at a time. Without it a `local` job cannot
    /// know what it missed while the process was down (said once at start, at info level).
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Whether `start()` fails when a guard's server (Redis, PostgreSQL) cannot be reached
    /// (default `false`).
    ///
    /// By default an unreachable server is not a start error: a deploy that starts while Redis is
    /// briefly down must not crash-loop. The jobs start, their fires are reported as misfires
    /// ("the guard could not be asked") and their health is `unknown` while the server is away, and
    /// everything resumes without a restart when it answers. A URL that does not parse, a wrong
    /// password or an unknown user is always a start error ([`ProblemKind::GuardRefused`]). With
    /// `true`, an unreachable server is a start error too ([`ProblemKind::Unreachable`]). See
    /// `docs/operations/starting-while-down.md`.
    pub fn require_guards_at_start(mut self, required: bool) -> Self {
        self.guards.required_at_start = required;
        self
    }

    /// The Redis URL of the `redis` guards: `redis://[user:password@]host:port[/db]` for one
    /// server, `rediss://...` (TLS, feature `redis-tls`),
    /// `redis+sentinel://[user:password@]host1:port1,host2:port2/<master name>[/db]` (the
    /// primary that Redis Sentinel names; the password is the Redis servers', the sentinels'
    /// own goes in the parameter `?sentinel_password=`), or
    /// `redis+cluster://[user:password@]host1:port1,host2:port2,...` for a Redis Cluster (any
    /// one reachable node is enough as a seed; a cluster has no database number).
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis_url(mut self, url: impl Into<String>) -> Self {
        self.guards.redis.url = Some(url.into());
        self.guards.redis_url_problem = None;
        self
    }

    /// For a `rediss://` URL (feature `redis-tls`): a PEM file of the CA certificate(s) that
    /// signed the server's certificate, trusted instead of the operating system's store (for a
    /// server with a certificate of a private CA). Also `CRONGUARD_REDIS_CA_FILE`. Set with a URL
    /// that does not use TLS, it is a start error.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis_tls_ca(mut self, ca_file: impl Into<PathBuf>) -> Self {
        self.guards.redis.tls.ca = Some(ca_file.into());
        self
    }

    /// For a `rediss://` URL (feature `redis-tls`) to a server with `tls-auth-clients yes`: PEM
    /// files of the client certificate (chain) and of its private key. Also
    /// `CRONGUARD_REDIS_CLIENT_CERT_FILE` and `CRONGUARD_REDIS_CLIENT_KEY_FILE`.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis_tls_client_cert(
        mut self,
        cert_file: impl Into<PathBuf>,
        key_file: impl Into<PathBuf>,
    ) -> Self {
        self.guards.redis.tls.client_cert = Some(cert_file.into());
        self.guards.redis.tls.client_key = Some(key_file.into());
        self
    }

    /// The first part of every Redis key (default `cronguard`, or `CRONGUARD_REDIS_PREFIX`): keys are
    /// `<prefix>:{<job>}:lock`, `<prefix>:{<job>}:state`, `<prefix>:{<job>}:cancel` and
    /// `<prefix>:{<job>}:reported:<fire ms>`.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.guards.redis.prefix = prefix.into();
        self
    }

    /// Makes every claim of a `redis` job — of a scheduled fire or of a run asked for with
    /// [`Monitor::trigger`](crate::Monitor::trigger) — wait until `replicas` replicas of the Redis
    /// primary have it (Redis `WAIT replicas timeout`, sent with the claim in the same round trip)
    /// before its run starts. A claim that fewer replicas acknowledged within `timeout` does not
    /// start the run: it fails with an error of kind
    /// [`GuardErrorKind::NotReplicated`](crate::guard::GuardErrorKind::NotReplicated) and is
    /// retried (as the same claimant) until the fire's grace runs out, and then reported as a
    /// misfire. `replicas` is at least 1 and `timeout` from 1 ms to 1 s; anything else is a start
    /// error.
    ///
    /// The renewals of a run's lease wait the same way, and extend the lease only once
    /// acknowledged: the lease counts from the last renewal that `replicas` replicas
    /// acknowledged, and a run whose renewals are not acknowledged within its lease loses it
    /// (`lease_lost`, then `cancelled`), as when Redis does not answer. So after a failover to one
    /// of those replicas, no run goes on past the lease that the new primary knows of.
    ///
    /// `WAIT` blocks the connection it is sent on, so claims go through a connection of their own
    /// and renewals through another (batched: runs that renew together share one `WAIT`); while
    /// the replicas lag, claims of jobs due together wait one after the other, so keep `timeout`
    /// short. Without this setting nothing waits, and a renewal costs no extra round trip.
    ///
    /// Redis replicates asynchronously: without this, a failover can lose the last claim and hand
    /// the same fire to a second replica. With it, a claim whose run started is on `replicas`
    /// replicas, which narrows that window but is no consensus: a failover can still promote a
    /// replica that had not received it. See `docs/operations/redis.md`.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis_wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.guards.redis.wait = Some((replicas, timeout));
        self
    }

    /// The PostgreSQL URL of the `postgres` guards (`postgres://user:password@host:5432/db`, or
    /// the `key=value` form). Also `CRONGUARD_POSTGRES_URL`, then `DATABASE_URL`.
    ///
    /// Its `sslmode` chooses TLS, as libpq does: `disable`; `prefer` (the default: TLS when the
    /// server offers it, without checking its certificate); `require` (always TLS, the
    /// certificate unchecked); `verify-ca` (the certificate's chain checked); `verify-full` (the
    /// chain and that the certificate names the URL's host). Every mode but `disable` needs the
    /// feature `postgres-tls` for TLS: without it `prefer` connects in plain text, and the others
    /// are a start error that names the feature. `sslrootcert`, `sslcert` and `sslkey` in the URL
    /// name the CA and client certificate files, as [`postgres_tls_ca`](Builder::postgres_tls_ca)
    /// and [`postgres_tls_client_cert`](Builder::postgres_tls_client_cert) do; with a CA given,
    /// `prefer` and `require` check the certificate's chain too. The URL's `connect_timeout`
    /// (seconds) is used when [`postgres_connect_timeout`](Builder::postgres_connect_timeout) is
    /// not. See `docs/operations/postgres.md`.
    ///
    /// Set both this and [`postgres_pool`](Builder::postgres_pool), it is a start error.
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub fn postgres_url(mut self, url: impl Into<String>) -> Self {
        self.guards.postgres.url = Some(url.into());
        self.guards.postgres_url_problem = None;
        self.guards.postgres.set_in_code("postgres_url");
        self
    }

    /// For a PostgreSQL URL with TLS (feature `postgres-tls`): a PEM file of the CA
    /// certificate(s) that signed the server's certificate, trusted instead of the operating
    /// system's store (for a server with a certificate of a private CA, or a managed service's
    /// own CA bundle such as Amazon RDS's). Also `CRONGUARD_POSTGRES_CA_FILE`, or
    /// `sslrootcert=<file>` in the URL (the same file twice is fine, two files a start error).
    /// With `sslmode=verify-ca` or `verify-full` the server's certificate is checked against it;
    /// with `prefer` or `require` its chain is too (as libpq does when it finds a root
    /// certificate), but not its host name. Set with `sslmode=disable`, or in a build without
    /// `postgres-tls`, it is a start error.
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub fn postgres_tls_ca(mut self, ca_file: impl Into<PathBuf>) -> Self {
        self.guards.postgres.tls.ca = Some(ca_file.into());
        self.guards.postgres.set_in_code("postgres_tls_ca");
        self
    }

    /// For a PostgreSQL URL with TLS (feature `postgres-tls`) to a server that asks for client
    /// certificates (`hostssl … cert` in `pg_hba.conf`): PEM files of the client certificate
    /// (chain) and of its private key. The server takes the certificate's common name as the
    /// user name, unless `pg_ident.conf` maps it. Also `CRONGUARD_POSTGRES_CLIENT_CERT_FILE` and
    /// `CRONGUARD_POSTGRES_CLIENT_KEY_FILE`, or `sslcert` and `sslkey` in the URL.
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub fn postgres_tls_client_cert(
        mut self,
        cert_file: impl Into<PathBuf>,
        key_file: impl Into<PathBuf>,
    ) -> Self {
        self.guards.postgres.tls.client_cert = Some(cert_file.into());
        self.guards.postgres.tls.client_key = Some(key_file.into());
        self.guards.postgres.set_in_code("postgres_tls_client_cert");
        self
    }

    /// How many connections the `postgres` guards' pool keeps at most (default
    /// [`DEFAULT_POSTGRES_POOL_SIZE`](crate::DEFAULT_POSTGRES_POOL_SIZE), 8), shared by every
    /// `postgres` job of the process: each claim, renewal or release batch, control-feed read or
    /// history write takes one for one statement and gives it back. Jobs due together are sent
    /// as a few statements at once (up to six), so fewer connections make them wait their turn
    /// (up to the [wait timeout](Builder::postgres_pool_wait_timeout)). At least 1: 0 is a start
    /// error. Also `CRONGUARD_POSTGRES_POOL_SIZE`.
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub fn postgres_pool_size(mut self, connections: usize) -> Self {
        self.guards.postgres.pool.size = Some(connections);
        self.guards.postgres.set_in_code("postgres_pool_size");
        self
    }

    /// How long making one PostgreSQL connection may take — the TCP connection, the TLS
    /// handshake and the authentication — before it counts as failed (default
    /// [`DEFAULT_POSTGRES_CONNECT_TIMEOUT`](crate::DEFAULT_POSTGRES_CONNECT_TIMEOUT), 2 s, or
    /// the URL's `connect_timeout`). A statement that needs a new connection waits for the
    /// longer of this and the [wait timeout](Builder::postgres_pool_wait_timeout). More than
    /// zero and at most 60 s, or a start error.
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub fn postgres_connect_timeout(mut self, timeout: Duration) -> Self {
        self.guards.postgres.pool.connect_timeout = Some(timeout);
        self.guards.postgres.set_in_code("postgres_connect_timeout");
        self
    }

    /// How long a statement of the `postgres` guards waits for a connection of the pool when all
    /// are in use (default
    /// [`DEFAULT_POSTGRES_POOL_WAIT_TIMEOUT`](crate::DEFAULT_POSTGRES_POOL_WAIT_TIMEOUT), 2 s);
    /// past it the statement fails as a timeout, and the claim is retried within the fire's
    /// grace. With [`postgres_pool`](Builder::postgres_pool) it bounds the wait for a connection
    /// of the application's pool. More than zero and at most 60 s, or a start error.
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub fn postgres_pool_wait_timeout(mut self, timeout: Duration) -> Self {
        self.guards.postgres.pool.wait_timeout = Some(timeout);
        self
    }

    /// Hands the `postgres` guards the application's own pool instead of a URL: cronguard makes
    /// no connection of its own, and the application's pool's URL, TLS, size and timeouts
    /// apply. It is a [`deadpool_postgres::Pool`](crate::deadpool_postgres::Pool) of the
    /// `deadpool-postgres` version cronguard re-exports (0.14).
    ///
    /// What cronguard does with the pool's connections: each statement takes one, runs in a
    /// transaction of its own (`BEGIN`, `SET LOCAL lock_timeout` and `statement_timeout`, the
    /// statement, `COMMIT`) and gives it back; nothing is left on the session — no `SET` outside
    /// a transaction, no named prepared statements, no advisory locks outside a transaction, no
    /// temporary tables, no `LISTEN` (the control feed is read by polling a table about once a
    /// second), and no connection is held between statements. A connection whose statement
    /// timed out or whose socket failed is taken out of the pool and closed (the pool makes a
    /// new one when asked). At start the schema's tables and functions are created when missing,
    /// so the pool's role needs `CREATE` on the database once, or the tables made beforehand
    /// (`docs/operations/postgres.md`). Claims compete with the application's queries for the
    /// connections: when the application holds them all for longer than the
    /// [wait timeout](Builder::postgres_pool_wait_timeout), claims fail as timeouts, are
    /// retried, and are reported as misfires once the fire's grace runs out.
    ///
    /// `CRONGUARD_POSTGRES_URL`, `DATABASE_URL` and the other connection variables of the
    /// environment are then not used (those of cronguard's own that are set are named at start,
    /// at info level). With
    /// [`postgres_url`](Builder::postgres_url),
    /// [`postgres_tls_ca`](Builder::postgres_tls_ca),
    /// [`postgres_tls_client_cert`](Builder::postgres_tls_client_cert),
    /// [`postgres_pool_size`](Builder::postgres_pool_size) or
    /// [`postgres_connect_timeout`](Builder::postgres_connect_timeout) also called, it is a
    /// start error: those set up connections of cronguard's own.
    ///
    /// ```no_run
    /// use cronguard::deadpool_postgres::{Config, Runtime};
    /// use cronguard::deadpool_postgres::tokio_postgres::NoTls;
    ///
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut config = Config::new();
    /// config.url = Some("postgres://app@db.internal/app".to_owned());
    /// let pool = config.create_pool(Some(Runtime::Tokio1), NoTls)?;
    /// let handle = cronguard::builder()
    ///     .state(pool.clone()) // the jobs' own queries use it too
    ///     .postgres_pool(pool)
    ///     .start()
    ///     .await?;
    /// # handle.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub fn postgres_pool(mut self, pool: crate::deadpool_postgres::Pool) -> Self {
        self.guards.postgres.shared = Some(pool);
        self.guards.postgres_url_problem = None;
        self
    }

    /// The schema of the `postgres` guard's tables (default `cronguard`): created at start when
    /// missing, with the tables and functions of `schema.sql` (`docs/operations/postgres.md`).
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub fn postgres_schema(mut self, schema: impl Into<String>) -> Self {
        self.guards.postgres.schema = schema.into();
        self
    }

    /// Keeps the run history of every job whose guard can keep it (`postgres`, custom guards),
    /// as `history` on each job would (default `false`). Read it with
    /// [`Monitor::history`](crate::Monitor::history).
    pub fn history(mut self, all: bool) -> Self {
        self.history = all;
        self
    }

    /// The standby of every job that does not set its own ([`Job::standby`]; default
    /// [`DEFAULT_STANDBY`](crate::DEFAULT_STANDBY), 1 s): how long a process that did not get a
    /// job's last fire waits before it claims the next one. Zero: every process claims every
    /// fire at once (docs/design/standby.md).
    pub fn standby(mut self, standby: Duration) -> Self {
        self.standby = Some(standby);
        self
    }

    /// How long before a fire's instant the jobs of the `redis` and `postgres` guards (and of
    /// custom guards that [claim ahead](crate::guard::Guard::claims_ahead)) may claim it
    /// (default zero: at the instant). The run still starts at the instant, without waiting for
    /// the guard, so a burst of thousands of jobs due together starts on time. At most
    /// [`MAX_CLAIM_AHEAD`](crate::MAX_CLAIM_AHEAD), 500 ms, and at most a quarter of each job's
    /// lease. What changes for a fire claimed ahead is in docs/design/standby.md.
    pub fn claim_ahead(mut self, lead: Duration) -> Self {
        self.claim_ahead = lead;
        self
    }

    /// Partition ownership for the jobs of the `redis` and `postgres` guards (default `true`;
    /// docs/design/ownership.md): the jobs hash into partitions, and of the processes that run
    /// the same shared jobs, each owns a share of the partitions under a lease in the store and
    /// alone claims their fires, while the others leave those fires to it instead of sending
    /// claims that lose. A process that stops renewing (stopped, killed, frozen, cut off) loses
    /// its partitions after [`PARTITION_LEASE`](crate::PARTITION_LEASE), and a shutdown hands
    /// them over at once; the next owner walks the fires its jobs left, claiming late those
    /// still inside their grace and reporting the others missed, once across the cluster. Who
    /// runs each fire is still decided by the per-fire record in the store, so processes with
    /// and without ownership, or of different versions, can share one store. `false`: every
    /// process claims every fire, those it did not get last a standby later
    /// ([`standby`](Self::standby)).
    pub fn partition_ownership(mut self, on: bool) -> Self {
        self.ownership = on;
        self
    }

    /// How many days of run history the guards keep (default 30): the `postgres` guard deletes
    /// older rows at start and every hour, 1,000 rows at a time; the `redis` and `file` guards
    /// drop older entries when they record one.
    pub fn history_retention_days(mut self, days: u32) -> Self {
        self.guards.history_retention_days = days;
        self
    }

    /// How many entries of each job's run history the `redis` and `file` guards keep: the
    /// newest, by fire (default [`RECENT_HISTORY_KEPT`](crate::history::RECENT_HISTORY_KEPT),
    /// 1,000; at most [`MAX_RECENT_HISTORY`](crate::history::MAX_RECENT_HISTORY)). Zero: they
    /// keep none, and [`Monitor::history`](crate::Monitor::history) answers that the guard
    /// keeps no history. They record the end of every run and every fire reported dropped, in
    /// the batch that carries the job's other operations (docs/operations/history.md).
    pub fn recent_history(mut self, entries: usize) -> Self {
        self.guards.recent_history = entries;
        self
    }

    /// Registers a guard of the application's own under `name`, for jobs with
    /// `lock = "custom:<name>"` (or [`Lock::Custom`]). `factory` is called once per job with the
    /// job's settings; the guard must keep the contract of the [`guard`](crate::guard) module,
    /// which the conformance suite (feature `conformance`) checks.
    pub fn custom_guard(
        mut self,
        name: impl Into<String>,
        factory: impl Fn(&GuardSpec) -> Arc<dyn Guard> + Send + Sync + 'static,
    ) -> Self {
        self.guards.custom.insert(name.into(), Arc::new(factory));
        self
    }

    /// This process's name in events and locks.
    pub fn instance(mut self, name: impl Into<String>) -> Self {
        self.instance = Some(name.into());
        self
    }

    /// The clock (see [`Clock`]): for tests on tokio's paused clock, or replicas with skewed clocks.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Adds a job defined in code.
    pub fn job(mut self, job: Job) -> Self {
        self.jobs.push(job);
        self
    }

    /// Adds every job of `jobs` (see [`job`](Builder::job)); for many jobs this is quicker than
    /// one `job` call each, as room for them is made once.
    pub fn jobs(mut self, jobs: impl IntoIterator<Item = Job>) -> Self {
        let jobs = jobs.into_iter();
        self.jobs.reserve(jobs.size_hint().0);
        self.jobs.extend(jobs);
        self
    }

    /// Whether to run the `#[scheduled]` jobs of the binary (default `true`).
    pub fn registered_jobs(mut self, include: bool) -> Self {
        self.include_registered = include;
        self
    }

    /// Calls `hook` with every event, in order, on a thread of its own: a slow, blocking or
    /// panicking hook never delays a timer or a job. [`Cronguard::shutdown`](crate::Cronguard::shutdown) returns after
    /// every event has reached the hooks, or after the shutdown timeout if a hook is stuck.
    pub fn on_event(mut self, hook: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// Gives jobs a value of the application's state: a database pool, a client, settings. Any
    /// `Send + Sync + 'static` type, one value per type (a second value of one type replaces the
    /// first); a `#[scheduled]` function receives it as a [`State<T>`](crate::State) argument,
    /// a job built in code through [`JobContext::state`](crate::JobContext::state). A job that
    /// needs a type no call gave makes [`start`](Builder::start) fail, naming the job and the
    /// type.
    ///
    /// ```
    /// use cronguard::{scheduled, JobContext, State};
    ///
    /// struct Settings {
    ///     greeting: &'static str,
    /// }
    /// struct Counter {
    ///     runs: std::sync::atomic::AtomicU64,
    /// }
    ///
    /// #[scheduled(every = "10s", name = "greeter")]
    /// fn greet(settings: State<Settings>, counter: State<Counter>, ctx: JobContext) {
    ///     let n = counter.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ///     println!("{} #{n} at {}", settings.greeting, ctx.fire_time());
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Without the state, `start` names the job and the type it lacks:
    /// let started = cronguard::builder().state(Counter { runs: 0.into() }).start().await;
    /// let Err(error) = started else { panic!("`Settings` is missing") };
    /// assert!(error.to_string().contains("job `greeter` needs state of type"));
    /// assert!(error.to_string().contains("Settings"));
    ///
    /// let handle = cronguard::builder()
    ///     .state(Settings { greeting: "hello" })
    ///     .state(Counter { runs: 0.into() })
    ///     .start()
    ///     .await?;
    /// # handle.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.states.insert(value);
        self
    }

    /// How long running jobs get to finish at shutdown before they are cancelled (default 30 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Checks the settings against the jobs and starts the scheduler.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] listing every problem at once.
    pub async fn start(self) -> Result<Cronguard, Error> {
        announce_without_subscriber();
        let mut problems: Vec<Problem> = Vec::new();
        let mut jobs = Vec::new();
        if self.include_registered {
            for s in registered() {
                match Job::from_static(s) {
                    Ok(job) => jobs.push(job),
                    Err(p) => problems.push(Problem::new(ProblemKind::InvalidJob, Some(s.name), p)),
                }
            }
        }
        // The builder's jobs stay where they are; the few registered ones join them.
        let mut jobs = if jobs.is_empty() {
            self.jobs
        } else {
            jobs.extend(self.jobs);
            jobs
        };
        let defaults = JobDefaults {
            history: self.history,
            standby: self.standby,
            claim_ahead: self.claim_ahead,
        };
        for job in &mut jobs {
            defaults.apply(job);
        }
        // The overrides of the environment and the overrides file, over the jobs' own settings
        // and the builder's defaults; checked below with every job's settings.
        crate::overrides::apply(&self.overrides, &mut jobs, &mut problems);

        for job in &jobs {
            problems.extend(job.problems());
            for key in job.states.iter().filter(|key| !self.states.contains(key)) {
                problems.push(Problem::new(
                    ProblemKind::MissingState,
                    Some(&job.name),
                    format!(
                        "job `{}` needs state of type `{}`, which was never given; pass a value of it to `Builder::state` (`cronguard::builder().state(value).start()`)",
                        job.name,
                        key.name()
                    ),
                ));
            }
        }
        problems.extend(duplicate_names(&jobs));
        if let Some(text) = self.selection.as_deref().filter(|t| !t.trim().is_empty()) {
            match Selection::parse(text) {
                Ok(selection) => {
                    let names: Vec<&str> = jobs.iter().map(|j| j.name()).collect();
                    for pattern in selection.unmatched(&names) {
                        tracing::warn!(pattern, "the job selection (`CRONGUARD_JOBS`) has a pattern that matches no job; check its spelling");
                    }
                    for job in &mut jobs {
                        if !selection.runs(job.name()) {
                            job.enabled = false;
                        }
                    }
                }
                Err(p) => problems.push(Problem::new(ProblemKind::Other, None, p)),
            }
        }

        if self.guards.recent_history > crate::history::MAX_RECENT_HISTORY {
            problems.push(Problem::new(
                ProblemKind::Other,
                None,
                format!(
                    "`recent_history` of {} entries per job is more than the most of {}: the guards read and trim a job's history whole; keep fewer, or keep the full history in PostgreSQL (`lock = \"postgres\"` with `history`)",
                    self.guards.recent_history,
                    crate::history::MAX_RECENT_HISTORY
                ),
            ));
        }

        if self.claim_ahead > crate::MAX_CLAIM_AHEAD {
            problems.push(Problem::new(
                ProblemKind::Other,
                None,
                format!(
                    "`claim_ahead` of {:?} is more than the most of {:?}: the guards take a fire at most 1 s ahead of their clock, and the rest is left for clock skew; give a shorter lead (250ms is plenty for 10,000 jobs due together)",
                    self.claim_ahead,
                    crate::MAX_CLAIM_AHEAD
                ),
            ));
        }

        let has_local = jobs.iter().any(|j| j.lock == Lock::Local && j.enabled);
        let state_dir = match (&self.state_dir, has_local) {
            (Some(dir), true) => match crate::state_dir::StateDir::open(dir) {
                Ok(state_dir) => Some(Arc::new(state_dir)),
                Err(p) => {
                    problems.push(Problem::new(ProblemKind::StateDir, None, p));
                    None
                }
            },
            (None, true) => {
                tracing::info!("`local` jobs cannot know which fires they missed while this process was down; set `CRONGUARD_STATE_DIR` (or `Builder::state_dir`) to a folder of their own to catch them up or report them when it starts");
                None
            }
            (_, false) => None,
        };
        let instance: Arc<str> = Arc::from(self.instance.unwrap_or_else(default_instance));
        let states = Arc::new(self.states);
        let stores = Stores::open(
            self.guards,
            &jobs,
            &instance,
            &states,
            &self.clock,
            &mut problems,
        )
        .await;
        if !problems.is_empty() {
            return Err(Error::Config { problems });
        }

        let shared = Shared {
            boot: self.clock.boot(),
            clock: self.clock,
            events: EventSink::new(self.hooks),
            instance: Arc::clone(&instance),
            stop: CancellationToken::new(),
            deadline: Arc::new(OnceLock::new()),
            tasks: tokio_util::task::TaskTracker::new(),
            origin: tokio::time::Instant::now(),
            states,
            presence: Arc::new(crate::executor::Presence::new(&instance, self.ownership)),
            state_dir,
        };
        let needs_retention = jobs.iter().any(|j| j.history && j.lock == Lock::Postgres);
        // In reverse, as the executor takes them from the back (in their first order), giving
        // back the room of those taken as it goes: a million jobs are not held twice.
        jobs.retain(|job| job.body.is_some()); // reported above: a job without a body does not start
        jobs.reverse();
        let job_guards: Vec<Option<Arc<dyn Guard>>> =
            jobs.iter().map(|job| stores.build(job)).collect();
        crate::guards::spawn_skew_monitors(
            jobs.iter().zip(job_guards.iter().map(Option::as_ref)),
            &shared.clock,
            &shared.stop,
        )
        .await;
        if needs_retention {
            stores.spawn_retention(&shared.stop);
        }
        let feeds = stores.feeds(jobs.iter().map(|job| &job.lock));
        let count = jobs.len();
        crate::metrics::describe();
        let shards = executor::start(
            executor::Ready {
                jobs,
                guards: job_guards,
            },
            &shared,
        );
        tracing::info!(jobs = count, instance = %shared.instance, "cronguard started");
        Ok(Cronguard::new(
            shards,
            shared,
            self.shutdown_timeout,
            feeds,
            Box::new(stores),
            defaults,
        ))
    }
}

/// A problem for each name that more than one job has, naming where each is defined.
fn duplicate_names(jobs: &[Job]) -> Vec<Problem> {
    // The names' hashes, sorted, then a map of only the names whose hash repeats: a map of a
    // million names would hold 50 MiB while every job is still held as given, more than the
    // jobs hold once started (BENCHMARKS.md).
    let state = RandomState::new();
    let mut hashes: Vec<u64> = jobs.iter().map(|job| state.hash_one(&*job.name)).collect();
    hashes.sort_unstable();
    let repeated_hashes: HashSet<u64> = hashes
        .windows(2)
        .filter(|pair| pair[0] == pair[1])
        .map(|pair| pair[0])
        .collect();
    drop(hashes);
    if repeated_hashes.is_empty() {
        return Vec::new();
    }
    let mut seen: HashMap<&str, u32> = HashMap::new();
    let mut repeated = BTreeMap::new();
    let candidates = jobs
        .iter()
        .filter(|job| repeated_hashes.contains(&state.hash_one(&*job.name)));
    for job in candidates {
        let count = seen.entry(&job.name).or_insert(0);
        *count += 1;
        if *count == 2 {
            repeated.insert(&*job.name, Vec::new());
        }
    }
    if repeated.is_empty() {
        return Vec::new();
    }
    for job in jobs {
        if let Some(same) = repeated.get_mut(&*job.name) {
            same.push(
                job.defined_at
                    .clone()
                    .unwrap_or_else(|| "a Job built in code".to_owned()),
            );
        }
    }
    repeated
        .into_iter()
        .map(|(name, places)| {
            Problem::new(
                ProblemKind::DuplicateName,
                Some(name),
                format!(
                    "{} jobs are named `{name}` (defined at {}); give each a unique `name = \"...\"`",
                    places.len(),
                    places.join(" and ")
                ),
            )
        })
        .collect()
}

fn default_instance() -> String {
    format!(
        "{}:{}",
        gethostname::gethostname().to_string_lossy(),
        std::process::id()
    )
}

/// Says once per process, on stderr, where cronguard's events go when no `tracing` subscriber
/// is installed, so that a first run is never silent (`docs/guide/first-job.md`).
fn announce_without_subscriber() {
    static ANNOUNCED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Some(line) = subscriber_notice(has_subscriber()) {
        if !ANNOUNCED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!("{line}");
        }
    }
}

/// Whether a `tracing` subscriber sees this thread's events (a global or a scoped one).
fn has_subscriber() -> bool {
    tracing::dispatcher::get_default(|d| !d.is::<tracing::subscriber::NoSubscriber>())
}

/// The line to print when no subscriber is installed.
fn subscriber_notice(has_subscriber: bool) -> Option<&'static str> {
    (!has_subscriber).then_some(
        "cronguard: no `tracing` subscriber is installed, so its logs of runs, skipped and \
         misfired fires go nowhere; install one before `start()`, e.g. \
         `tracing_subscriber::fmt().init()` (crate `tracing-subscriber`), or read them through \
         `Builder::on_event` or `handle.monitor().subscribe()`",
    )
}

#[cfg(test)]
mod subscriber_tests {
    use super::*;

    #[test]
    fn a_run_without_a_subscriber_is_told_where_events_go() {
        assert!(!has_subscriber(), "the unit tests install none");
        let line = subscriber_notice(false).expect("a notice");
        assert!(line.contains("tracing_subscriber::fmt().init()"), "{line}");
        assert!(!line.contains('\n'));
        assert_eq!(subscriber_notice(true), None);
        let dispatch = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
        tracing::dispatcher::with_default(&dispatch, || assert!(!has_subscriber()));
    }
}
