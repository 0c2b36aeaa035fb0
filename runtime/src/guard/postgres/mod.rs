//! `lock = "postgres"`: mutual exclusion, per-fire uniqueness and run history in PostgreSQL.
//!
//! The state of a job is one row of `<schema>.jobs` (see [`schema`] for every column). A claim is
//! one statement, one round trip: `SELECT … FROM <schema>.claim_v5(…)`, a function that locks the
//! job's row (`SELECT … FOR UPDATE`), so that concurrent claims of one job are decided one after
//! the other on the latest row, and answers exactly as the Redis guard's claim script does
//! (acquired, claimed by another, dropped by another, already ran, busy, lapsed, too early,
//! superseded, paused). A manual run is claimed by `claim_manual_v2`, one statement of its own
//! (manual runs are rare, so they are not batched). Every time comes from the database's
//! `clock_timestamp()`, never from a replica: the lease is `lease_until` on the database clock. Renewal, release and abandon compare the claimant's token first.
//!
//! The job's fate point is the newest of `last_fire`, `reported_through` (the newest fire reported
//! dropped) and `missed_through` (the newest reported missed). `report_missed_v1` reads it and
//! moves `missed_through` under the job's row lock, as `claim_v5` and `first_report_v1` decide
//! under it, so that a fire is claimed, reported dropped or reported missed by one claimant;
//! `report_missed_v2` records the missed fires from the reporter's first on, and keeps each
//! answer in `missed_answers`, so that a retry of a report whose first try took effect unheard is
//! answered the same; `report_missed_v3` first refuses missed fires whose misfire grace has not
//! passed by the database's clock (they come from a host whose clock is ahead).
//!
//! Nothing depends on a session: no advisory locks, no temporary tables, no named prepared
//! statements (every statement is sent unnamed with its parameter types, [`query_typed`]), so the
//! guard works through PgBouncer in transaction mode and a recycled pooled connection leaks
//! nothing — which is also why the application's own pool can be shared (`Builder::postgres_pool`).
//! How connections are made (TLS, the pool) is in [`connect`].
//!
//! [`query_typed`]: tokio_postgres::Client::query_typed

mod batch;
pub(crate) mod connect;
mod feed;
pub(crate) mod schema;
#[cfg(test)]
mod server_tests;
mod store;
#[cfg(all(test, not(feature = "postgres-tls")))]
mod tls_absent_tests;
#[cfg(all(test, feature = "postgres-tls"))]
mod tls_tests;

pub use connect::{
    DEFAULT_POSTGRES_CONNECT_TIMEOUT, DEFAULT_POSTGRES_POOL_SIZE,
    DEFAULT_POSTGRES_POOL_WAIT_TIMEOUT,
};
// Built by the scheduler's control wiring, which lands separately.
pub(crate) use feed::PostgresFeed;
pub use store::DEFAULT_POSTGRES_SCHEMA;
pub(crate) use store::{PostgresSettings, PostgresStore};

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{Object, Pool};
use tokio::time::Instant;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;

use super::{
    Claim, DropReport, Guard, GuardControls, GuardError, GuardErrorKind, GuardHistory, Lease,
    Renewal,
};
use crate::control::{ManualRun, Pause};
use crate::history::{HistoryEntry, Outcome, HISTORY_LIMIT};
use crate::options::Overlap;
use crate::registry::BoxFuture;

/// How far a fire may lie ahead of the database clock and still be claimed (as for Redis).
const CLAIM_AHEAD_TOLERANCE_MS: i64 = 1000;

/// How long one statement may take once it has a connection; a frozen database turns into
/// errors, never into a stuck scheduler. The wait for a connection has its own deadline
/// ([`Database::wait`]).
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens the transaction each statement runs in, with server-side limits below
/// [`STATEMENT_TIMEOUT`]: the server ends a statement that waits for a row lock longer than
/// 800 ms, or runs longer than 1.5 s, and frees its locks before the client gives up on it and
/// drops the connection (a backend waiting for a lock does not notice a closed socket, and would
/// go on waiting with the locks it already holds). A row locked elsewhere (an operator's
/// `SELECT … FOR UPDATE` left open) fails the statement with `lock_not_available`, and a batch
/// then retries its operations one by one (see `batch.rs`). `SET LOCAL` holds for the
/// transaction only, so that it works through PgBouncer in transaction mode (which drops the
/// startup `options`) and leaves nothing on a pooled connection.
const LIMITS: &str = "BEGIN; SET LOCAL lock_timeout = 800; SET LOCAL statement_timeout = 1500";

/// The connections and the statements of one schema, shared by every `postgres` job of a process.
pub(crate) struct Database {
    /// cronguard's own pool, or the application's (`Builder::postgres_pool`): a connection is
    /// taken for one statement (one transaction) and given back, never held between them.
    pool: Pool,
    /// How long a statement waits for a connection of the pool, a new one made included.
    wait: Duration,
    sql: Statements,
    schema: String,
    /// Held while the schema is created again (see [`Database::query`]), so that the jobs of a
    /// process do not all try at once.
    recreating: tokio::sync::Mutex<()>,
    /// The schema was found or made. `false` only when the database could not be reached at
    /// start: the first statement that reaches it makes the schema first.
    schema_ready: std::sync::atomic::AtomicBool,
    /// The task that sends claims, renewals and releases in batches, started at the first.
    batches: std::sync::OnceLock<batch::Batches>,
    /// Statements sent so far (round trips), for the tests and the benchmarks.
    statements: std::sync::atomic::AtomicU64,
}

/// What opening the database found.
pub(crate) enum Open {
    /// Connected, the schema in place.
    Ready(Database),
    /// The server did not answer; the connections and the schema are made when it does. The text
    /// says why.
    Unreachable(Database, String),
    /// The URL, the credentials or the schema are wrong: a start problem.
    Failed(OpenFailure),
}

/// Why a PostgreSQL store cannot be used, as a start problem of its kind.
#[derive(Debug)]
pub(crate) enum OpenFailure {
    /// The URL or the schema name is not valid.
    Settings(String),
    /// The server refused the connection (the user, the password, the database).
    Refused(String),
    /// TLS is set up in a way that cannot work with this server (a certificate not trusted, a
    /// client certificate missing, TLS asked of a server without it); the text says what to do.
    Tls(String),
    /// A table of the schema exists but is not cronguard's.
    ForeignTable(String),
    /// The schema could not be made ready.
    Store(GuardError),
}

impl OpenFailure {
    /// The kind of start problem this is.
    pub(crate) fn problem_kind(&self) -> crate::error::ProblemKind {
        use crate::error::ProblemKind;
        match self {
            OpenFailure::Settings(_) | OpenFailure::Refused(_) | OpenFailure::Tls(_) => {
                ProblemKind::GuardRefused
            }
            OpenFailure::ForeignTable(_) => ProblemKind::ForeignTable,
            OpenFailure::Store(_) => ProblemKind::Other,
        }
    }
}

impl std::fmt::Display for OpenFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenFailure::Settings(text)
            | OpenFailure::ForeignTable(text)
            | OpenFailure::Tls(text) => f.write_str(text),
            OpenFailure::Refused(text) => write!(f, "{text}; check the user, the password and the database of the URL (`CRONGUARD_POSTGRES_URL`) or of the application's pool"),
            OpenFailure::Store(e) => write!(f, "{}", crate::error::Chain(e)),
        }
    }
}

impl From<schema::SchemaError> for OpenFailure {
    fn from(e: schema::SchemaError) -> Self {
        match e {
            schema::SchemaError::Foreign(text) => OpenFailure::ForeignTable(text),
            schema::SchemaError::Store(e) => OpenFailure::Store(e),
        }
    }
}

struct Statements {
    claim_batch: String,
    claim_manual: String,
    set_pause: String,
    pause: String,
    renew_batch: String,
    release_batch: String,
    abandon: String,
    first_report: String,
    last_claimed: String,
    fate_point_batch: String,
    report_missed: String,
    run_ended: String,
    dropped: String,
    history: String,
    prune: String,
}

impl Statements {
    fn new(s: &str) -> Self {
        Statements {
            // Each row of the batch is a call of the function a single claim would make, in the
            // order of the arrays (sorted by job, so that replicas lock rows in one order).
            claim_batch: format!(
                "SELECT c.answer, c.val, c.ignored, c.paused_at, c.paused_by FROM unnest($1::text[], $2::timestamptz[], \
                 $3::text[], $4::bigint[], $5::boolean[], $6::boolean[], $7::text[], $8::text[], \
                 $9::boolean[]) WITH ORDINALITY \
                 AS b(job, fire, token, lease_ms, replace, skip, nonce, instance, history, ord) \
                 CROSS JOIN LATERAL {s}.claim_v5(b.job, b.fire, b.token, b.lease_ms, b.replace, \
                 b.skip, b.nonce, $10, b.instance, b.history) AS c ORDER BY b.ord"
            ),
            claim_manual: format!(
                "SELECT answer, val FROM {s}.claim_manual_v2($1, $2, $3, $4, $5, $6, $7, $8)"
            ),
            set_pause: format!(
                "INSERT INTO {s}.jobs (job, paused_at, paused_by) VALUES ($1, $2, $3) \
                 ON CONFLICT (job) DO UPDATE SET paused_at = EXCLUDED.paused_at, \
                 paused_by = EXCLUDED.paused_by"
            ),
            pause: format!("SELECT paused_at, paused_by FROM {s}.jobs WHERE job = $1"),
            renew_batch: format!(
                "SELECT r.answer FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY \
                 AS b(job, token, lease_ms, ord) \
                 CROSS JOIN LATERAL {s}.renew_v1(b.job, b.token, b.lease_ms) AS r(answer) \
                 ORDER BY b.ord"
            ),
            release_batch: format!(
                "SELECT r.released FROM unnest($1::text[], $2::text[]) WITH ORDINALITY \
                 AS b(job, token, ord) \
                 CROSS JOIN LATERAL {s}.release_v1(b.job, b.token) AS r(released) ORDER BY b.ord"
            ),
            abandon: format!("SELECT {s}.abandon_v1($1, $2, $3)"),
            first_report: format!("SELECT {s}.first_report_v2($1, $2, $3)"),
            last_claimed: format!(
                "SELECT CASE \
                   WHEN last_fire > clock_timestamp() + interval '1 second' THEN \
                     (SELECT max(f) FROM unnest(recent_fires) AS f \
                      WHERE f <= clock_timestamp() + interval '1 second') \
                   WHEN lapsed IS DISTINCT FROM last_fire THEN last_fire END \
                 FROM {s}.jobs WHERE job = $1"
            ),
            fate_point_batch: format!(
                "SELECT {s}.fate_point_v1(b.job, $2) FROM unnest($1::text[]) WITH ORDINALITY \
                 AS b(job, ord) ORDER BY b.ord"
            ),
            report_missed: format!("SELECT {s}.report_missed_v3($1, $2, $3, $4, $5, $6)"),
            run_ended: format!(
                "UPDATE {s}.runs SET ended = clock_timestamp(), outcome = $4, error = $5 \
                 WHERE job = $1 AND fire = $2 AND fence = $3"
            ),
            dropped: format!(
                "INSERT INTO {s}.runs (job, fire, instance, ended, outcome, error) \
                 VALUES ($1, $2, $3, clock_timestamp(), $4, $5)"
            ),
            history: format!(
                "SELECT fire, instance, fence, started, ended, outcome, error, lateness_ms \
                 FROM {s}.runs WHERE job = $1 AND fire >= $2 ORDER BY fire, id LIMIT $3"
            ),
            prune: format!(
                "DELETE FROM {s}.runs WHERE id IN (SELECT id FROM {s}.runs \
                 WHERE fire < clock_timestamp() - $1 * interval '1 day' LIMIT $2)"
            ),
        }
    }
}

/// Why a PostgreSQL call failed, in one line: the server's message and what it refers to.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut text = format!("{} ({})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                text.push_str(": ");
                text.push_str(detail);
            }
            text
        }
        None => {
            // The client's own text, plus its cause (a refused connection, a closed socket).
            let mut text = e.to_string();
            if let Some(source) = std::error::Error::source(e) {
                text.push_str(": ");
                text.push_str(&source.to_string());
            }
            text
        }
    }
}

/// A failed request as a guard's failure; `kind` is decided where the failure was met.
pub(crate) fn failure(kind: GuardErrorKind, text: impl std::fmt::Display) -> GuardError {
    GuardError::new(kind, format!("the PostgreSQL request failed: {text}"))
}

/// The kind of a failed call: the server's own verdict where it answered, otherwise a server
/// that could not be reached.
fn kind_of(e: &tokio_postgres::Error) -> GuardErrorKind {
    if e.as_db_error().is_none() && connect::tls_problem(e).is_some() {
        // A failed handshake: a misconfiguration, not an outage.
        return GuardErrorKind::Refused;
    }
    match e.code() {
        Some(c) if [SqlState::QUERY_CANCELED, SqlState::LOCK_NOT_AVAILABLE].contains(c) => {
            GuardErrorKind::Timeout
        }
        Some(c)
            if [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
                SqlState::TOO_MANY_CONNECTIONS,
            ]
            .contains(c) =>
        {
            GuardErrorKind::Unreachable
        }
        Some(_) => GuardErrorKind::Refused,
        None if e.is_closed() => GuardErrorKind::Unreachable,
        None => match std::error::Error::source(e) {
            Some(source) if source.is::<std::io::Error>() => GuardErrorKind::Unreachable,
            _ => GuardErrorKind::Refused,
        },
    }
}

/// A failed statement, and whether a row lock held elsewhere made it fail.
struct Failed {
    error: GuardError,
    locked: bool,
}

impl From<GuardError> for Failed {
    fn from(error: GuardError) -> Self {
        Failed {
            error,
            locked: false,
        }
    }
}

fn pg_err(e: &tokio_postgres::Error) -> GuardError {
    let text = match e.as_db_error() {
        None => connect::tls_problem(e).unwrap_or_else(|| describe(e)),
        Some(_) => describe(e),
    };
    failure(kind_of(e), text)
}

/// A deadline of `what` that passed.
fn too_slow(what: impl std::fmt::Display) -> GuardError {
    failure(GuardErrorKind::Timeout, what)
}

type Params<'a> = [(&'a (dyn ToSql + Sync), Type)];

impl Database {
    /// Opens `pool` and makes sure schema `schema` holds cronguard's tables (see
    /// [`schema::ensure`]); a server that does not answer is [`Open::Unreachable`], not an error.
    /// A statement waits up to `wait` for a connection of the pool.
    pub(crate) async fn open(pool: Pool, wait: Duration, schema: &str) -> Open {
        let db = match Database::new(pool, wait, schema) {
            Ok(db) => db,
            Err(e) => return Open::Failed(OpenFailure::Settings(e)),
        };
        let got = match tokio::time::timeout(wait, db.pool.get()).await {
            Ok(got) => got,
            Err(_) => {
                let why = format!("no connection within {wait:?}");
                return Open::Unreachable(db, why);
            }
        };
        let tls_problem = match &got {
            Err(deadpool_postgres::PoolError::Backend(e)) => connect::tls_problem(e),
            _ => None,
        };
        if let Some(why) = tls_problem {
            return Open::Failed(OpenFailure::Tls(why));
        }
        let mut client = match got {
            Ok(client) => client,
            Err(e) if unreachable(&e) => {
                let why = pool_text(&e);
                return Open::Unreachable(db, why);
            }
            Err(e) => {
                return Open::Failed(OpenFailure::Refused(format!(
                    "PostgreSQL refused the connection ({})",
                    pool_text(&e)
                )))
            }
        };
        let client: &mut tokio_postgres::Client = &mut client;
        if let Err(e) = schema::ensure(client, schema).await {
            return Open::Failed(e.into());
        }
        db.schema_ready
            .store(true, std::sync::atomic::Ordering::Release);
        Open::Ready(db)
    }

    /// Connects to `url` (no TLS files, the default pool) and makes sure the schema is there; an
    /// unreachable server is an error.
    #[cfg_attr(not(any(test, feature = "redis")), allow(dead_code))]
    pub(crate) async fn connect(url: &str, schema: &str) -> Result<Database, String> {
        let settings = PostgresSettings::for_url(url, schema);
        Database::connect_with(&settings).await
    }

    /// Connects as `settings` say and makes sure the schema is there; an unreachable server is an
    /// error.
    pub(crate) async fn connect_with(settings: &PostgresSettings) -> Result<Database, String> {
        let (pool, wait) = settings.pool().map_err(|problems| {
            problems
                .into_iter()
                .map(|(_, text)| text)
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        match Database::open(pool, wait, &settings.schema).await {
            Open::Ready(db) => Ok(db),
            Open::Unreachable(_, why) => Err(format!("PostgreSQL cannot be reached ({why})")),
            Open::Failed(e) => Err(e.to_string()),
        }
    }

    /// The store of `schema` on `pool`, none of whose connections is made yet.
    fn new(pool: Pool, wait: Duration, schema: &str) -> Result<Database, String> {
        schema::check_name(schema)?;
        Ok(Database {
            pool,
            wait,
            sql: Statements::new(schema),
            schema: schema.to_owned(),
            recreating: tokio::sync::Mutex::new(()),
            schema_ready: std::sync::atomic::AtomicBool::new(false),
            batches: std::sync::OnceLock::new(),
            statements: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// A connection of the pool within [`wait`](Database::wait).
    async fn connection(&self) -> Result<Object, GuardError> {
        tokio::time::timeout(self.wait, self.pool.get())
            .await
            .map_err(|_| too_slow(format_args!("no connection within {:?}", self.wait)))?
            .map_err(|e| pool_error(&e))
    }

    /// Makes the schema on `client` if it was not checked yet (the database was unreachable at
    /// start). A schema holding a table that is not cronguard's fails every statement, each time
    /// with the reason.
    async fn ensure_schema(&self, client: &mut Object) -> Result<(), GuardError> {
        use std::sync::atomic::Ordering;
        if self.schema_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let _one = self.recreating.lock().await;
        if self.schema_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let client: &mut tokio_postgres::Client = client;
        match tokio::time::timeout(STATEMENT_TIMEOUT * 5, schema::ensure(client, &self.schema))
            .await
        {
            Ok(Ok(())) => {
                self.schema_ready.store(true, Ordering::Release);
                tracing::info!(schema = %self.schema, "connected to PostgreSQL; cronguard's tables are in place");
                Ok(())
            }
            Ok(Err(e)) => Err(e.into_guard_error()),
            Err(_) => Err(too_slow("checking cronguard's tables took too long")),
        }
    }

    /// Runs one statement with a deadline. A connection whose statement failed for any reason
    /// but a database error (a timeout, a dropped socket) is taken out of the pool and closed, so
    /// that no later statement waits behind an answer that may never come.
    async fn query(&self, sql: &str, params: &Params<'_>) -> Result<Vec<Row>, GuardError> {
        self.query_or_locked(sql, params)
            .await
            .map_err(|failed| failed.error)
    }

    /// [`query`](Self::query), telling apart a statement that failed because a row it needed
    /// was locked elsewhere for longer than the lock timeout of [`LIMITS`]; it took no effect.
    async fn query_or_locked(&self, sql: &str, params: &Params<'_>) -> Result<Vec<Row>, Failed> {
        let mut client = self.connection().await?;
        self.ensure_schema(&mut client).await?;
        self.statements
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Sent together, so still one round trip: the three requests are written before any
        // answer is read. After a failed statement `COMMIT` ends the transaction as a rollback.
        let in_transaction = async {
            let (begun, rows, committed) = tokio::join!(
                client.batch_execute(LIMITS),
                client.query_typed(sql, params),
                client.batch_execute("COMMIT"),
            );
            let rows = rows?;
            begun?;
            committed?;
            Ok::<_, tokio_postgres::Error>(rows)
        };
        match tokio::time::timeout(STATEMENT_TIMEOUT, in_transaction).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => {
                let missing = e.code().is_some_and(|c| {
                    [
                        SqlState::UNDEFINED_TABLE,
                        SqlState::UNDEFINED_FUNCTION,
                        SqlState::INVALID_SCHEMA_NAME,
                    ]
                    .contains(c)
                });
                if missing {
                    // The database lost cronguard's tables (restored from an older backup,
                    // recreated empty): make them again, so that claims work at the next retry
                    // instead of failing until the process restarts.
                    self.recreate(client).await;
                } else if e.as_db_error().is_none() {
                    drop(Object::take(client));
                }
                Err(Failed {
                    locked: e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE),
                    error: pg_err(&e),
                })
            }
            Err(_) => {
                drop(Object::take(client));
                Err(too_slow(format_args!(
                    "no answer within {} s",
                    STATEMENT_TIMEOUT.as_secs()
                ))
                .into())
            }
        }
    }

    /// Creates the schema again after a statement found it missing; logged, never an error of its
    /// own (the statement's error is what the caller reports).
    async fn recreate(&self, mut client: Object) {
        let Ok(_one) = self.recreating.try_lock() else {
            return; // another job of this process is at it
        };
        let client: &mut tokio_postgres::Client = &mut client;
        match tokio::time::timeout(STATEMENT_TIMEOUT * 5, schema::ensure(client, &self.schema))
            .await
        {
            Ok(Ok(())) => tracing::warn!(
                schema = %self.schema,
                "cronguard's tables were missing from the database and were created again; fires claimed before are forgotten, so fencing tokens continue from the clock"
            ),
            Ok(Err(e)) => {
                tracing::error!(schema = %self.schema, error = %crate::error::Chain(&e.into_guard_error()), "cronguard's tables are missing from the database and cannot be created again")
            }
            Err(_) => {
                tracing::error!(schema = %self.schema, "cronguard's tables are missing from the database; creating them again took too long")
            }
        }
    }

    /// Statements sent so far: each is one round trip.
    #[cfg_attr(not(any(test, feature = "redis")), allow(dead_code))]
    pub(crate) fn statements(&self) -> u64 {
        self.statements.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The database clock.
    pub(crate) async fn now(&self) -> Result<DateTime<Utc>, GuardError> {
        let rows = self.query("SELECT clock_timestamp()", &[]).await?;
        first(&rows)?.try_get(0).map_err(|e| pg_err(&e))
    }

    /// Deletes history older than `days` days, in batches of 1,000 rows; returns how many.
    pub(crate) async fn prune_history(&self, days: u32) -> Result<u64, GuardError> {
        const BATCH: i64 = 1000;
        let mut deleted = 0;
        loop {
            let mut client = self.connection().await?;
            self.ensure_schema(&mut client).await?;
            let n = client
                .execute_typed(
                    &self.sql.prune,
                    &[(&f64::from(days), Type::FLOAT8), (&BATCH, Type::INT8)],
                )
                .await
                .map_err(|e| pg_err(&e))?;
            deleted += n;
            if n < BATCH as u64 {
                return Ok(deleted);
            }
        }
    }
}

/// A PostgreSQL connection string without its password, for messages: the password of
/// `postgres://user:password@host/db` and the value of `password=` in its query, or in the
/// `key=value` form (quoted or not, with spaces around `=`), become `***`.
pub(crate) fn redact(url: &str) -> String {
    if !url.contains("://") {
        return redact_key_value(url);
    }
    let masked: Vec<String> = url
        .split_inclusive(['?', '&'])
        .map(|part| {
            let (body, sep) = match part.char_indices().last() {
                Some((i, '?' | '&')) => (&part[..i], &part[i..]),
                _ => (part, ""),
            };
            match body.split_once('=') {
                Some((key, _)) if key.trim().eq_ignore_ascii_case("password") => {
                    format!("{key}=***{sep}")
                }
                _ => part.to_owned(),
            }
        })
        .collect();
    let url = masked.concat();
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme + 3 => match url[scheme + 3..at].split_once(':') {
            Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
            None => url,
        },
        _ => url,
    }
}

/// The `key = value` form, read as libpq reads it: a value is quoted (`'...'`) or runs to the
/// next space, and a backslash escapes the next character in both.
fn redact_key_value(conninfo: &str) -> String {
    let mut out = String::with_capacity(conninfo.len());
    let mut rest = conninfo;
    loop {
        let trimmed = rest.trim_start();
        out.push_str(&rest[..rest.len() - trimmed.len()]);
        rest = trimmed;
        if rest.is_empty() {
            return out;
        }
        let key_end = rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        let key = &rest[..key_end];
        out.push_str(key);
        rest = &rest[key_end..];
        let Some(after_equals) = rest.trim_start().strip_prefix('=') else {
            continue; // not `key = value`: left as it is
        };
        let value = after_equals.trim_start();
        out.push_str(&rest[..rest.len() - value.len()]);
        let length = value_length(value);
        if key.eq_ignore_ascii_case("password") {
            out.push_str("***");
        } else {
            out.push_str(&value[..length]);
        }
        rest = &value[length..];
    }
}

/// How many bytes of `s` its first `key=value` value takes (see [`redact_key_value`]).
fn value_length(s: &str) -> usize {
    let quoted = s.starts_with('\'');
    let mut chars = s.char_indices().skip(usize::from(quoted));
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '\'' if quoted => return i + 1,
            c if !quoted && c.is_whitespace() => return i,
            _ => {}
        }
    }
    s.len()
}

/// Whether `e` says the server did not answer, as opposed to refusing us.
fn unreachable(e: &deadpool_postgres::PoolError) -> bool {
    match e {
        deadpool_postgres::PoolError::Backend(e) => e.as_db_error().is_none(),
        deadpool_postgres::PoolError::Timeout(_) => true,
        _ => false,
    }
}

fn pool_text(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => describe(e),
        other => other.to_string(),
    }
}

fn pool_error(e: &deadpool_postgres::PoolError) -> GuardError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => pg_err(e),
        deadpool_postgres::PoolError::Timeout(_) => too_slow(e),
        other => failure(GuardErrorKind::Unreachable, other),
    }
}

fn first(rows: &[Row]) -> Result<&Row, GuardError> {
    rows.first()
        .ok_or_else(|| failure(GuardErrorKind::Invalid, "the statement returned no row"))
}

fn lease_ms(lease: Duration) -> Result<i64, GuardError> {
    cronguard_schedule::check_lease(lease)
        .and_then(|()| i64::try_from(lease.as_millis()).map_err(|e| e.to_string()))
        .map_err(|e| {
            failure(
                GuardErrorKind::Invalid,
                format!("the lease of {lease:?} {e}"),
            )
        })
}

/// The guard of one job.
pub(crate) struct PostgresGuard {
    db: Arc<Database>,
    job: Arc<str>,
    /// Random, made once per guard value: with a fire's time it makes the claimant's token, so
    /// that a claim repeated by this guard value (its reply was lost) is the same claimant.
    nonce: Arc<str>,
    instance: Arc<str>,
    lease: Duration,
    replace: bool,
    skip: bool,
    history: bool,
    /// A manual run asked for longer ago than this is refused.
    misfire_grace: Duration,
}

impl PostgresGuard {
    pub(crate) fn new(
        db: Arc<Database>,
        job: &str,
        instance: Arc<str>,
        lease: Duration,
        overlap: Overlap,
        history: bool,
    ) -> Self {
        PostgresGuard {
            db,
            job: Arc::from(job),
            nonce: Arc::from(format!(
                "{:016x}{:016x}",
                fastrand::u64(..),
                fastrand::u64(..)
            )),
            instance,
            lease,
            replace: overlap == Overlap::Replace,
            skip: overlap == Overlap::Skip,
            history,
            misfire_grace: crate::DEFAULT_MISFIRE_GRACE,
        }
    }

    /// The job's misfire grace, which bounds how late a manual run may still be claimed, and
    /// how early, by the database's clock, a fire may be reported missed.
    pub(crate) fn with_misfire_grace(mut self, grace: Duration) -> Self {
        self.misfire_grace = grace;
        self
    }

    /// The connections this guard uses.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn database(&self) -> &Arc<Database> {
        &self.db
    }

    fn token(&self, fire: DateTime<Utc>) -> String {
        format!("{}:{}", self.nonce, fire.timestamp_millis())
    }
}

impl Guard for PostgresGuard {
    fn claim(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        let db = Arc::clone(&self.db);
        let job = Arc::clone(&self.job);
        let nonce = Arc::clone(&self.nonce);
        let instance = Arc::clone(&self.instance);
        let token = self.token(fire_time);
        let (lease, replace, skip, history) = (self.lease, self.replace, self.skip, self.history);
        Box::pin(async move {
            let ms = lease_ms(lease)?;
            let sent_at = Instant::now();
            let reply = db
                .batched(batch::Op::Claim(batch::ClaimOp {
                    job: Arc::clone(&job),
                    fire: fire_time,
                    token: token.clone(),
                    lease_ms: ms,
                    replace,
                    skip,
                    nonce,
                    instance,
                    history,
                }))
                .await?;
            let batch::Reply::Claim(answer, value, ignored, paused) = reply else {
                return Err(failure(
                    GuardErrorKind::Invalid,
                    "the batch answered a claim with another kind of answer".to_owned(),
                ));
            };
            if ignored {
                tracing::error!(
                    job = %job,
                    fire_time = %fire_time,
                    "the last claimed fire recorded in PostgreSQL lies more than 1 s ahead of the database clock (a replica's clock was ahead, or the database's clock was set back); it was ignored so that it does not silence the job. Run NTP on every host and on the database server"
                );
            }
            let value = u64::try_from(value).unwrap_or(0);
            Ok(match answer {
                0 => Claim::AlreadyRan,
                7 => Claim::ClaimedByAnother,
                8 => Claim::DroppedByAnother,
                1 => Claim::Busy {
                    first_report: value == 1,
                },
                6 => {
                    let (at, by) = paused.ok_or_else(|| {
                        failure(
                            GuardErrorKind::Invalid,
                            "the claim function answered paused without the pause".to_owned(),
                        )
                    })?;
                    Claim::Paused {
                        pause: Pause::new(by, at),
                        first_report: value == 1,
                    }
                }
                3 => Claim::Lapsed,
                4 => Claim::TooEarly {
                    ahead: Duration::from_millis(value),
                },
                5 => Claim::Superseded,
                2 => Claim::Acquired(Box::new(PostgresLease {
                    db,
                    job,
                    token,
                    fencing_token: value,
                    lease,
                    sent_at,
                })),
                other => {
                    return Err(failure(GuardErrorKind::Invalid, format!(
                        "the claim function answered {other}, which this version of cronguard does not know; run one version of cronguard against one schema, or set another with `Builder::postgres_schema`"
                    )))
                }
            })
        })
    }

    fn report_drop(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<DropReport, GuardError>> {
        let db = Arc::clone(&self.db);
        let job = Arc::clone(&self.job);
        let nonce = Arc::clone(&self.nonce);
        Box::pin(async move {
            let rows = db
                .query(
                    &db.sql.first_report,
                    &[
                        (&&*job, Type::TEXT),
                        (&fire_time, Type::TIMESTAMPTZ),
                        (&&*nonce, Type::TEXT),
                    ],
                )
                .await?;
            let answer: i32 = first(&rows)?.try_get(0).map_err(|e| pg_err(&e))?;
            match answer {
                0 => Ok(DropReport::ReportedElsewhere),
                1 => Ok(DropReport::First),
                2 => Ok(DropReport::ClaimedElsewhere),
                other => Err(GuardError::invalid(format!(
                    "first_report_v2 answered {other}, which this version of cronguard does not know; run one version of cronguard against one schema, or set another schema with `Builder::postgres_schema`"
                ))),
            }
        })
    }

    fn abandon(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<(), GuardError>> {
        let db = Arc::clone(&self.db);
        let job = Arc::clone(&self.job);
        let token = self.token(fire_time);
        Box::pin(async move {
            db.query(
                &db.sql.abandon,
                &[
                    (&&*job, Type::TEXT),
                    (&fire_time, Type::TIMESTAMPTZ),
                    (&token, Type::TEXT),
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let db = Arc::clone(&self.db);
        let job = Arc::clone(&self.job);
        Box::pin(async move {
            let rows = db
                .query(&db.sql.last_claimed, &[(&&*job, Type::TEXT)])
                .await?;
            match rows.first() {
                None => Ok(None),
                Some(row) => row.try_get(0).map_err(|e| pg_err(&e)),
            }
        })
    }

    fn fate_point(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let db = Arc::clone(&self.db);
        let job = Arc::clone(&self.job);
        Box::pin(async move {
            match db.batched(batch::Op::FatePoint { job }).await? {
                batch::Reply::FatePoint(point) => Ok(point),
                _ => Err(failure(
                    GuardErrorKind::Invalid,
                    "the batch answered a fate point with another kind of answer",
                )),
            }
        })
    }

    fn report_missed(
        &self,
        first_fire: DateTime<Utc>,
        last: DateTime<Utc>,
    ) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let db = Arc::clone(&self.db);
        let job = Arc::clone(&self.job);
        let nonce = Arc::clone(&self.nonce);
        let grace = i64::try_from(self.misfire_grace.as_millis()).unwrap_or(i64::MAX);
        Box::pin(async move {
            let rows = db
                .query(
                    &db.sql.report_missed,
                    &[
                        (&&*job, Type::TEXT),
                        (&first_fire, Type::TIMESTAMPTZ),
                        (&last, Type::TIMESTAMPTZ),
                        (&CLAIM_AHEAD_TOLERANCE_MS, Type::INT8),
                        (&grace, Type::INT8),
                        (&&*nonce, Type::TEXT),
                    ],
                )
                .await?;
            first(&rows)?.try_get(0).map_err(|e| pg_err(&e))
        })
    }

    fn server_time(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let db = Arc::clone(&self.db);
        Box::pin(async move { db.now().await.map(Some) })
    }

    fn claims_ahead(&self) -> bool {
        true
    }

    fn repeats_missed_answers(&self) -> bool {
        true
    }

    fn controls(&self) -> Option<&dyn GuardControls> {
        Some(self)
    }

    fn history(&self) -> Option<&dyn GuardHistory> {
        self.history.then_some(self as &dyn GuardHistory)
    }
}

impl GuardControls for PostgresGuard {
    fn set_pause(&self, pause: Option<Pause>) -> BoxFuture<Result<(), GuardError>> {
        let db = Arc::clone(&self.db);
        let job = Arc::clone(&self.job);
        Box::pin(async move {
            let at = pause.as_ref().map(|p| p.at);
            let by = pause.map(|p| p.by);
            db.query(
                &db.sql.set_pause,
                &[
                    (&&*job, Type::TEXT),
                    (&at, Type::TIMESTAMPTZ),
                    (&by, Type::TEXT),
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn pause(&self) -> BoxFuture<Result<Option<Pause>, GuardError>> {
        let db = Arc::clone(&self.db);
        let job = Arc::clone(&self.job);
        Box::pin(async move {
            let rows = db.query(&db.sql.pause, &[(&&*job, Type::TEXT)]).await?;
            let Some(row) = rows.first() else {
                return Ok(None);
            };
            let at: Option<DateTime<Utc>> = row.try_get(0).map_err(|e| pg_err(&e))?;
            let by: Option<String> = row.try_get(1).map_err(|e| pg_err(&e))?;
            Ok(at.map(|at| Pause::new(by.unwrap_or_default(), at)))
        })
    }

    fn claim_manual(&self, run: ManualRun) -> BoxFuture<Result<Claim, GuardError>> {
        let db = Arc::clone(&self.db);
        let job = Arc::clone(&self.job);
        let instance = Arc::clone(&self.instance);
        let id = format!("{:016x}", run.id);
        // The same for every claim of this run by this guard value; never a scheduled fire's.
        let token = format!("{}:manual:{id}", self.nonce);
        let (lease, history) = (self.lease, self.history);
        let grace = i64::try_from(self.misfire_grace.as_millis()).unwrap_or(i64::MAX);
        Box::pin(async move {
            let ms = lease_ms(lease)?;
            let sent_at = Instant::now();
            let rows = db
                .query(
                    &db.sql.claim_manual,
                    &[
                        (&&*job, Type::TEXT),
                        (&id, Type::TEXT),
                        (&token, Type::TEXT),
                        (&ms, Type::INT8),
                        (&run.requested_at, Type::TIMESTAMPTZ),
                        (&grace, Type::INT8),
                        (&&*instance, Type::TEXT),
                        (&history, Type::BOOL),
                    ],
                )
                .await?;
            let row = first(&rows)?;
            let answer: i32 = row.try_get(0).map_err(|e| pg_err(&e))?;
            let value: i64 = row.try_get(1).map_err(|e| pg_err(&e))?;
            Ok(match answer {
                0 => Claim::AlreadyRan,
                1 => Claim::Busy { first_report: true },
                3 => Claim::Lapsed,
                9 => Claim::TooLate {
                    late: Duration::from_millis(u64::try_from(value).unwrap_or(0)),
                },
                2 => Claim::Acquired(Box::new(PostgresLease {
                    db,
                    job,
                    token,
                    fencing_token: u64::try_from(value).unwrap_or(0),
                    lease,
                    sent_at,
                })),
                other => {
                    return Err(failure(GuardErrorKind::Invalid, format!(
                        "the manual claim function answered {other}, which this version of cronguard does not know; run one version of cronguard against one schema, or set another with `Builder::postgres_schema`"
                    )))
                }
            })
        })
    }
}

impl GuardHistory for PostgresGuard {
    fn record(&self, entry: HistoryEntry) -> BoxFuture<Result<(), GuardError>> {
        let db = Arc::clone(&self.db);
        Box::pin(async move {
            let outcome = entry.outcome.as_str();
            match entry.fencing_token {
                Some(token) => {
                    let fence = i64::try_from(token).unwrap_or(i64::MAX);
                    db.query(
                        &db.sql.run_ended,
                        &[
                            (&entry.job, Type::TEXT),
                            (&entry.fire_time, Type::TIMESTAMPTZ),
                            (&fence, Type::INT8),
                            (&outcome, Type::TEXT),
                            (&entry.error, Type::TEXT),
                        ],
                    )
                    .await?
                }
                None => {
                    db.query(
                        &db.sql.dropped,
                        &[
                            (&entry.job, Type::TEXT),
                            (&entry.fire_time, Type::TIMESTAMPTZ),
                            (&entry.instance, Type::TEXT),
                            (&outcome, Type::TEXT),
                            (&entry.error, Type::TEXT),
                        ],
                    )
                    .await?
                }
            };
            Ok(())
        })
    }

    fn read(&self, since: DateTime<Utc>) -> BoxFuture<Result<Vec<HistoryEntry>, GuardError>> {
        let db = Arc::clone(&self.db);
        let job = Arc::clone(&self.job);
        Box::pin(async move {
            let limit = HISTORY_LIMIT as i64;
            let rows = db
                .query(
                    &db.sql.history,
                    &[
                        (&&*job, Type::TEXT),
                        (&since, Type::TIMESTAMPTZ),
                        (&limit, Type::INT8),
                    ],
                )
                .await?;
            rows.iter()
                .map(|row| history_entry(&job, row))
                .collect::<Result<Vec<_>, _>>()
        })
    }
}

fn history_entry(job: &str, row: &Row) -> Result<HistoryEntry, GuardError> {
    let get_err = |e: tokio_postgres::Error| pg_err(&e);
    let outcome: String = row.try_get(5).map_err(get_err)?;
    let outcome = Outcome::from_name(&outcome).ok_or_else(|| {
        failure(
            GuardErrorKind::Invalid,
            format!(
            "the history holds an outcome `{outcome}` that this version of cronguard does not know"
        ),
        )
    })?;
    let fence: Option<i64> = row.try_get(2).map_err(get_err)?;
    let lateness: Option<i64> = row.try_get(7).map_err(get_err)?;
    let mut entry = HistoryEntry::new(
        job,
        row.try_get(0).map_err(get_err)?,
        row.try_get::<_, String>(1).map_err(get_err)?,
        outcome,
    );
    entry.fencing_token = fence.and_then(|f| u64::try_from(f).ok());
    entry.started = row.try_get(3).map_err(get_err)?;
    entry.ended = row.try_get(4).map_err(get_err)?;
    entry.error = row.try_get(6).map_err(get_err)?;
    entry.lateness = lateness
        .and_then(|ms| u64::try_from(ms).ok())
        .map(Duration::from_millis);
    Ok(entry)
}

struct PostgresLease {
    db: Arc<Database>,
    job: Arc<str>,
    token: String,
    fencing_token: u64,
    lease: Duration,
    sent_at: Instant,
}

impl Lease for PostgresLease {
    fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    fn expiry(&self) -> Option<(Duration, Instant)> {
        Some((self.lease, self.sent_at))
    }

    fn renew(&self) -> BoxFuture<Result<Renewal, GuardError>> {
        let db = Arc::clone(&self.db);
        let job = Arc::clone(&self.job);
        let token = self.token.clone();
        let lease = self.lease;
        Box::pin(async move {
            let ms = lease_ms(lease)?;
            let reply = db
                .batched(batch::Op::Renew {
                    job,
                    token,
                    lease_ms: ms,
                })
                .await?;
            Ok(match reply {
                batch::Reply::Renew(0) => Renewal::Lost,
                batch::Reply::Renew(2) => Renewal::CancelRequested,
                batch::Reply::Renew(_) => Renewal::Renewed,
                _ => {
                    return Err(failure(
                        GuardErrorKind::Invalid,
                        "the batch answered a renewal with another kind of answer".to_owned(),
                    ))
                }
            })
        })
    }

    fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>> {
        Box::pin(async move {
            let reply = self
                .db
                .batched(batch::Op::Release {
                    job: Arc::clone(&self.job),
                    token: self.token.clone(),
                })
                .await?;
            if let batch::Reply::Release(false) = reply {
                tracing::debug!(job = %self.job, "released a lease that had already run out");
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_the_password_in_every_form() {
        for (url, shown) in [
            (
                "postgres://app:s3cret@127.0.0.1:5432/db",
                "postgres://app:***@127.0.0.1:5432/db",
            ),
            (
                "postgresql://app:s3@c/ret@db.example/app?sslmode=disable",
                "postgresql://app:***@db.example/app?sslmode=disable",
            ),
            (
                "postgres://db.example/app?user=app&password=s3cret",
                "postgres://db.example/app?user=app&password=***",
            ),
            (
                "host=127.0.0.1 user=app password=s3cret dbname=app",
                "host=127.0.0.1 user=app password=*** dbname=app",
            ),
            ("postgres://app@127.0.0.1/db", "postgres://app@127.0.0.1/db"),
            // Quoted, escaped, with spaces around `=`, in any case.
            (
                "host=127.0.0.1 user=app password='s3 cret' dbname=app",
                "host=127.0.0.1 user=app password=*** dbname=app",
            ),
            (
                "host=h password = s3cret dbname=a",
                "host=h password = *** dbname=a",
            ),
            (
                "host=h password='s3 \\'cr\\\\et x' dbname='a b'",
                "host=h password=*** dbname='a b'",
            ),
            ("PASSWORD=s3\\ cret host=h", "PASSWORD=*** host=h"),
            ("password='unterminated secret", "password=***"),
            ("host=h password", "host=h password"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }

    #[test]
    fn a_lease_out_of_range_is_refused_not_truncated() {
        assert_eq!(lease_ms(Duration::from_secs(30)).ok(), Some(30_000));
        for lease in [Duration::from_millis(1), Duration::from_secs(u64::MAX)] {
            let err = lease_ms(lease).expect_err("out of range").to_string();
            assert!(err.contains("from 100ms to 24h"), "{err}");
        }
    }
}
