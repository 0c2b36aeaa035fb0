//! `lock = "redis"`: mutual exclusion and per-fire uniqueness across a cluster.
//!
//! Keys of one job share the hash tag `{<job>}`, so they live in one slot of a Redis Cluster:
//!
//! - `<prefix>:{<job>}:lock`: the holder's token, with `PX lease`. A token is a random nonce made
//!   once per guard value and the fire's Unix ms, so the same guard value claiming the same fire
//!   again uses the same token;
//! - `<prefix>:{<job>}:state`: a hash with `last` (the last claimed fire, Unix ms), `fence` (its
//!   fencing token), `holder` (the token that claimed it), `n` and `r0`..`r7` (a ring of the last
//!   eight claims as `fire token`, so that a retry of a claim is recognised even after later fires
//!   were claimed, a fire another claimant took is named (`ClaimedByAnother`), and a fire that
//!   nobody claimed before a later one is told apart (`Superseded`) from an older one that is
//!   simply past (`AlreadyRan`)), `lapsed` (a last claimed fire that was given up unstarted:
//!   its claimant's reply was lost, or it came too late to run; the health check does not count it
//!   as run), `ab` (the tokens of the newest eight claims given up before they reached the
//!   server, after a reconnection say: such a claim is refused as `Lapsed`, so that it neither holds the lock for a
//!   lease nor takes the fire from its claimant's drop report), `rep` (the newest fire with a report record, so that a claim reads the record
//!   of its fire only when there may be one) and `gone` (the newest fire reported missed while
//!   no process ran the job: a claim of it or of an older fire nobody claimed answers
//!   `DroppedByAnother`, except after `gb` up to `gf`: the newest missed fires were recorded
//!   after `gf`, the fate point or the reporter's first fire, whichever is later, and `gb` is the
//!   newest missed fire before them). The job's fate point is the greatest of `last`, `rep` and `gone`
//!   (docs/guide/downtime.md);
//! - `<prefix>:{<job>}:reported:<fire ms>`: the nonce of the guard value that first reported
//!   fire `<fire ms>` as dropped, with `PX` of one hour, so that a drop seen by several replicas
//!   is reported at warn level once, and decided for all of them: another guard value's claim of
//!   the fire answers `DroppedByAnother`. One key per fire: a report of fire 5 after one of fire
//!   7 is a first report too. A busy claim writes it only for `overlap = "skip"`, where the busy
//!   fire is dropped; under `queue` and `replace` the fire waits, and its misfire, if it comes to
//!   that, is reported through `first_report`;
//! - `<prefix>:{<job>}:missed:<nonce>:<last ms>`: the fate point a report of missed fires up to
//!   `<last ms>` by one guard value was answered, with `PX` of one hour, so that a retry of it
//!   whose first try took effect unheard is answered the same (`-`: there was no point);
//! - `<prefix>:{<job>}:cancel`: the token of a holder that another replica asked to stop
//!   (`overlap = "replace"`), with `PX lease`; the holder reads it when it renews.
//! - `<prefix>:{<job>}:manual`: the manual runs claimed, a sorted set of ids scored by when each
//!   was asked for (Unix ms); the state hash names each one's claimant (`m:<id>`) and the newest
//!   request forgotten (`mf`). A run is kept while a claim of it could be granted: for the job's
//!   misfire grace from its request, by the server's clock.
//!
//! A claim is one script, one round trip; the operations of many jobs due at the same instant
//! share one call of the script (see [`batch`]), each answered as if it had run alone. It reads the server's `TIME` and refuses a fire further
//! ahead of it than [`CLAIM_AHEAD_TOLERANCE`] (`TooEarly`, nothing written), so that one replica
//! with a clock far ahead cannot record a future fire that would make every replica's claims
//! `AlreadyRan`; a recorded fire that far ahead is ignored (and logged at error level). A fire
//! ahead of the server's clock at all is granted only while the job is free: busy or paused, it
//! answers `TooEarly` too and records nothing, so that a claim sent ahead of the fire's instant
//! (docs/design/standby.md) never decides a skip before that instant. A release
//! and a renewal are one script each, and both compare the token first, so only the holder can
//! release or extend its lease.
//!
//! A claim whose reply is lost (a timeout, a dropped connection) may still have been applied. Its
//! retry carries the same token, so the script recognises it from the recent claims: while
//! the lock still holds that token the retry is `Acquired` again, with the stored fencing token and
//! the lock extended to a whole lease from the retry; once the lock is gone it is `Lapsed`. Never
//! `AlreadyRan`, which would drop the fire without a word. A claim that is given up without an
//! answer (its fire's grace ran out) is abandoned: one script frees its lock if it holds it and
//! records the fire as not started.
//!
//! With `Builder::redis_wait_for_replicas` every claim, scheduled or manual, and every renewal is
//! followed by `WAIT` in the same round trip, and counts only once the replicas acknowledged it
//! (see [`Replication`] and docs/operations/redis.md).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::aio::ConnectionLike;
use redis::Value;
use tokio::time::Instant;

use super::{Claim, DropReport, Guard, GuardControls, GuardError, GuardHistory, Lease, Renewal};
use crate::clock::epoch_millis;
use crate::control::{ManualRun, Pause};
use crate::history::{HistoryEntry, RecentHistory, HISTORY_LIMIT};
use crate::options::Overlap;
use crate::registry::BoxFuture;

mod batch;
mod cluster;
#[cfg(test)]
mod cluster_tests;
mod connection;
pub(crate) mod failure;
mod feed;
mod scripts;
mod sentinel;
#[cfg(test)]
mod sentinel_tests;
mod store;
mod tls;
#[cfg(all(test, not(feature = "redis-tls")))]
mod tls_absent_tests;
#[cfg(all(test, feature = "redis-tls"))]
mod tls_tests;

pub(crate) use batch::Batcher;
#[cfg(all(test, feature = "redis-tls"))]
pub(crate) use connection::connect_with;
pub(crate) use connection::{connect, open_with, Open, RedisConn};
// Built by the scheduler's control wiring, which lands separately.
use batch::Arg;
pub(crate) use feed::RedisFeed;
use scripts::op;
pub(crate) use scripts::BATCH_LUA;
pub(crate) use store::{redact, RedisSettings, RedisStore};
pub(crate) use tls::TlsFiles;

/// How far a fire may lie ahead of the Redis server's clock and still be claimed: 1 s.
///
/// A replica's timer fires on its own clock, so a claim arrives a little before the server's
/// time when that clock is slightly ahead; within this tolerance that is an ordinary fire. A fire
/// further ahead comes from a clock that is wrong: the claim answers [`Claim::TooEarly`] and
/// writes nothing, because a recorded fire in the future would make every replica's claim of
/// every fire up to it `AlreadyRan` — one bad clock would silence the job cluster-wide. For the
/// same reason a recorded `last` further ahead than this (written before this check, or before
/// the server's clock was set back) is ignored, and logged at error level.
pub(crate) const CLAIM_AHEAD_TOLERANCE: Duration = Duration::from_millis(CLAIM_AHEAD_TOLERANCE_MS);
const CLAIM_AHEAD_TOLERANCE_MS: u64 = 1000;

/// How long the record of a reported drop is kept, in ms: 1 h. The replicas that see a drop
/// report it within about one misfire grace of each other, so they all find the record; after
/// that the key would only be garbage, one per dropped fire.
const REPORT_TTL_MS: u64 = 60 * 60 * 1000;

/// How many replicas must acknowledge an acquired claim or a renewal, and how long the primary
/// waits for them (`WAIT replicas timeout`):
/// [`Builder::redis_wait_for_replicas`](crate::Builder::redis_wait_for_replicas).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplicaWait {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
}

/// The longest `WAIT` timeout: the claim and its `WAIT` share one request, which must be answered
/// within the connection's response timeout (2 s).
pub(crate) const MAX_WAIT_TIMEOUT: Duration = Duration::from_secs(1);

impl ReplicaWait {
    /// Checks the setting: at least one replica, and a timeout from 1 ms to [`MAX_WAIT_TIMEOUT`]
    /// (`WAIT` with 0 would block forever).
    pub(crate) fn check(replicas: u32, timeout: Duration) -> Result<Self, String> {
        if replicas == 0 {
            return Err("`Builder::redis_wait_for_replicas` waits for at least 1 replica; to not wait, do not call it".to_owned());
        }
        if timeout < Duration::from_millis(1) || timeout > MAX_WAIT_TIMEOUT {
            return Err(format!(
                "the timeout of `Builder::redis_wait_for_replicas` is {timeout:?}; it must be from 1ms to {MAX_WAIT_TIMEOUT:?}, so that the claim and its WAIT are answered within the 2 s response timeout"
            ));
        }
        Ok(ReplicaWait { replicas, timeout })
    }
}

/// What `Builder::redis_wait_for_replicas` asks of the guards of one store: the replicas, and
/// the two connections that wait for them. `WAIT` blocks the connection it is sent on until the
/// replicas answer or the timeout passes, so neither carries the releases and reports of the
/// main connection, and the renewals that keep runs going do not queue behind the claims of jobs
/// due together (docs/operations/redis.md).
pub(crate) struct Replication {
    wait: ReplicaWait,
    /// The connection of the claims, scheduled and manual: each is sent on its own with its
    /// `WAIT`.
    claims: RedisConn,
    /// The renewals, batched: the runs renewing at about the same instant share one `WAIT`.
    renewals: Arc<Batcher>,
}

impl Replication {
    /// Claims wait on `claims`, renewals on `renewals`: connections of their own to the same
    /// server(s). Must be called inside a tokio runtime (it starts the renewals' batcher).
    pub(crate) fn new(wait: ReplicaWait, claims: RedisConn, renewals: RedisConn) -> Arc<Self> {
        Arc::new(Replication {
            wait,
            claims,
            renewals: Batcher::waiting(renewals, wait),
        })
    }

    /// Whether `acked` replicas are enough.
    fn enough(&self, acked: u64) -> bool {
        acked >= u64::from(self.wait.replicas)
    }
}

pub(crate) struct RedisGuard {
    conn: RedisConn,
    batcher: Arc<Batcher>,
    /// The replicas an acquired claim must reach before its run may start, and a renewal before
    /// it extends the lease.
    wait: Option<Arc<Replication>>,
    /// Random, made once per guard value: with a fire's time it makes the lock token, so that a
    /// claim repeated by this guard value (its reply was lost) is recognised as the same claimant.
    nonce: Arc<str>,
    /// `<nonce>:`: followed by a fire's Unix ms, the lock token of this guard value's claim.
    token_prefix: Arc<str>,
    lock_key: Arc<str>,
    state_key: Arc<str>,
    cancel_key: Arc<str>,
    /// The manual runs claimed, scored by their request.
    manual_key: Arc<str>,
    /// `<prefix>:{<job>}:reported:`, followed by a fire's Unix ms.
    reported_prefix: Arc<str>,
    /// `<prefix>:{<job>}:missed:<nonce>:`, followed by the last fire of a report of missed
    /// fires: the answer this guard value was given.
    missed_prefix: Arc<str>,
    /// The job's recent history: a sorted set of entries scored by their fire.
    history_key: Arc<str>,
    history_kept: RecentHistory,
    job: Arc<str>,
    lease: Duration,
    replace: bool,
    /// `overlap = "skip"`: a busy fire is dropped, so the claim records its report.
    skip: bool,
    /// A manual run asked for longer ago than this is refused.
    misfire_grace: Duration,
}

impl RedisGuard {
    /// The guard of `job`; its operations go through `batcher`, which must send them on `conn`.
    pub(crate) fn new(
        conn: RedisConn,
        batcher: Arc<Batcher>,
        prefix: &str,
        job: &str,
        lease: Duration,
        overlap: Overlap,
    ) -> Self {
        let nonce = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
        let missed_prefix = Arc::from(format!("{prefix}:{{{job}}}:missed:{nonce}:"));
        RedisGuard {
            conn,
            batcher,
            wait: None,
            token_prefix: Arc::from(format!("{nonce}:")),
            nonce: Arc::from(nonce),
            lock_key: Arc::from(format!("{prefix}:{{{job}}}:lock")),
            state_key: Arc::from(format!("{prefix}:{{{job}}}:state")),
            cancel_key: Arc::from(format!("{prefix}:{{{job}}}:cancel")),
            manual_key: Arc::from(format!("{prefix}:{{{job}}}:manual")),
            reported_prefix: Arc::from(format!("{prefix}:{{{job}}}:reported:")),
            missed_prefix,
            history_key: Arc::from(format!("{prefix}:{{{job}}}:history")),
            history_kept: RecentHistory::default(),
            job: Arc::from(job),
            lease,
            replace: overlap == Overlap::Replace,
            skip: overlap == Overlap::Skip,
            misfire_grace: crate::DEFAULT_MISFIRE_GRACE,
        }
    }

    /// The job's misfire grace, which bounds how late a manual run may still be claimed, and
    /// how early, by the server's clock, a fire may be reported missed.
    pub(crate) fn with_misfire_grace(mut self, grace: Duration) -> Self {
        self.misfire_grace = grace;
        self
    }

    /// The misfire grace in ms, as the scripts take it.
    fn grace_ms(&self) -> i64 {
        i64::try_from(self.misfire_grace.as_millis()).unwrap_or(i64::MAX)
    }

    /// How much of the job's history to keep.
    pub(crate) fn keeping_history(mut self, kept: RecentHistory) -> Self {
        self.history_kept = kept;
        self
    }

    /// Acquired claims must reach the replicas of `wait` before their run starts, and renewals
    /// before they extend the lease.
    pub(crate) fn waiting_for_replicas(mut self, wait: Option<Arc<Replication>>) -> Self {
        self.wait = wait;
        self
    }
}

/// Carries out `op`, a claim: through the batcher, or, when claims wait for replicas, on its own
/// with its `WAIT` in the same round trip; the answer, and how many replicas acknowledged it.
async fn claim_op(
    batcher: &Batcher,
    wait: Option<&Replication>,
    op: batch::Op,
    key: &str,
) -> Result<(Value, Option<u64>), GuardError> {
    let Some(wait) = wait else {
        return Ok((batcher.call(op).await.map_err(redis_err)?, None));
    };
    let mut conn = wait.claims.clone();
    let evalsha = batch::Op::script_call(std::iter::once(&op));
    let (reply, acked) = batch::call_and_wait(&mut conn, evalsha, key, wait.wait)
        .await
        .map_err(redis_err)?;
    let Value::Array(mut answers) = reply else {
        return Err(GuardError::invalid(format!(
            "the batch script answered {reply:?}; run one version of cronguard against one Redis key prefix, or set another prefix with `Builder::redis_prefix`"
        )));
    };
    if answers.len() != 1 {
        return Err(GuardError::invalid(format!(
            "the batch script answered {} operations to one",
            answers.len()
        )));
    }
    Ok((answers.remove(0), Some(acked)))
}

fn redis_err(e: redis::RedisError) -> GuardError {
    failure::guard_error(e)
}

/// The lease as Redis `PX` milliseconds. `Job::problems` and the macro keep leases within
/// `MIN_LEASE..=MAX_LEASE`; this refuses anything else rather than cut it down to a wrong
/// expiry.
fn lease_px(lease: Duration) -> Result<u64, GuardError> {
    cronguard_schedule::check_lease(lease)
        .and_then(|()| u64::try_from(lease.as_millis()).map_err(|e| e.to_string()))
        .map_err(|e| GuardError::invalid(format!("the lease of {lease:?} {e}")))
}

/// [`lease_px`] as an argument of the batch script.
fn px_arg(lease: Duration) -> Result<Arg, GuardError> {
    let px = lease_px(lease)?;
    Ok(Arg::Int(i64::try_from(px).unwrap_or(i64::MAX)))
}

/// The integers of one operation's answer (`{-1, message}` is the operation's error).
fn answer(value: Value) -> Result<Vec<i64>, GuardError> {
    let Value::Array(items) = value else {
        return Err(GuardError::invalid(format!(
            "the batch script answered {value:?} for an operation; run one version of cronguard against one Redis key prefix, or set another prefix with `Builder::redis_prefix`"
        )));
    };
    if let [Value::Int(-1), message] = &items[..] {
        let text = <String as redis::FromRedisValue>::from_redis_value_ref(message)
            .unwrap_or_else(|_| format!("{message:?}"));
        return Err(GuardError::invalid(text));
    }
    items
        .iter()
        .map(|v| match v {
            Value::Int(n) => Ok(*n),
            other => Err(GuardError::invalid(format!(
                "the batch script answered {other:?} where a number belongs"
            ))),
        })
        .collect()
}

/// The first integer of an operation's answer.
async fn call_one(batcher: &Batcher, op: batch::Op) -> Result<i64, GuardError> {
    let value = batcher.call(op).await.map_err(redis_err)?;
    answer(value)?
        .first()
        .copied()
        .ok_or_else(|| GuardError::invalid("the batch script answered nothing".to_owned()))
}

/// A fate point as the script answers it: `{1, point}`, or `{0}` when the store holds no record.
fn point_answer(value: Value) -> Result<Option<DateTime<Utc>>, GuardError> {
    match answer(value)?[..] {
        [0] => Ok(None),
        [1, ms] => DateTime::<Utc>::from_timestamp_millis(ms)
            .map(Some)
            .ok_or_else(|| GuardError::invalid(format!("the fate point {ms} is out of range"))),
        ref other => Err(GuardError::invalid(format!(
            "the fate point was answered as {other:?}; run one version of cronguard against one Redis key prefix, or set another prefix with `Builder::redis_prefix`"
        ))),
    }
}

/// A claim's answer: `(answer, value, ignored, the pause as stored)`; the pause only with answer
/// `6`.
fn claim_answer(value: Value) -> Result<(i64, i64, i64, Option<String>), GuardError> {
    let mismatch = |what: &dyn std::fmt::Debug| {
        GuardError::invalid(format!(
            "the claim answered {what:?}; run one version of cronguard against one Redis key prefix, or set another prefix with `Builder::redis_prefix`"
        ))
    };
    let paused = match &value {
        Value::Array(items) if items.len() == 4 && matches!(items[0], Value::Int(6)) => Some(
            <String as redis::FromRedisValue>::from_redis_value_ref(&items[3])
                .map_err(|_| mismatch(&items[3]))?,
        ),
        _ => None,
    };
    let value = match (value, paused.is_some()) {
        (Value::Array(mut items), true) => {
            items.truncate(3);
            Value::Array(items)
        }
        (value, _) => value,
    };
    match answer(value)?[..] {
        [code, value, ignored] => Ok((code, value, ignored, paused)),
        ref other => Err(mismatch(&other)),
    }
}

/// The field `paused` of a job's state hash as it is stored: `<at ms> <by>`.
fn format_pause(pause: &Pause) -> String {
    format!("{} {}", pause.at.timestamp_millis(), pause.by)
}

/// Reads what [`format_pause`] wrote.
fn parse_pause(state_key: &str, stored: &str) -> Result<Pause, GuardError> {
    stored
        .split_once(' ')
        .and_then(|(at, by)| {
            let at = DateTime::<Utc>::from_timestamp_millis(at.parse().ok()?)?;
            Some(Pause::new(by, at))
        })
        .ok_or_else(|| {
            GuardError::invalid(format!(
                "the field `paused` of the hash {state_key} holds `{stored}`, not `<Unix ms> <who>`; resume the job (HDEL {state_key} paused) and pause it again"
            ))
        })
}

impl Guard for RedisGuard {
    fn claim(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        let batcher = Arc::clone(&self.batcher);
        let lock_key = Arc::clone(&self.lock_key);
        let state_key = Arc::clone(&self.state_key);
        let cancel_key = Arc::clone(&self.cancel_key);
        let lease = self.lease;
        let fire = epoch_millis(fire_time);
        let flag = |on: bool| Arg::Static(if on { "1" } else { "0" });
        let (replace, skip) = (flag(self.replace), flag(self.skip));
        let reported_key = Arg::Joined(Arc::clone(&self.reported_prefix), fire);
        // The same for every claim of this fire by this guard value.
        let token = Arg::Joined(Arc::clone(&self.token_prefix), fire);
        let nonce = Arg::Shared(Arc::clone(&self.nonce));
        let wait = self.wait.clone();
        Box::pin(async move {
            let px = px_arg(lease)?;
            // The lock's expiry on the server is at least a lease after this instant, also when
            // this claim repeats one that took effect (the script extends the lock then).
            let sent_at = Instant::now();
            let op = batch::Op {
                code: op::CLAIM,
                keys: vec![
                    Arg::Shared(Arc::clone(&lock_key)),
                    Arg::Shared(Arc::clone(&state_key)),
                    Arg::Shared(Arc::clone(&cancel_key)),
                    reported_key,
                ],
                args: vec![
                    Arg::Int(fire),
                    token.clone(),
                    px,
                    replace,
                    Arg::Int(CLAIM_AHEAD_TOLERANCE_MS as i64),
                    skip,
                    nonce,
                    Arg::Int(REPORT_TTL_MS as i64),
                ],
            };
            let (value, acked) = claim_op(&batcher, wait.as_deref(), op, &state_key).await?;
            let (code, value, ignored, paused) = claim_answer(value)?;
            if ignored == 1 {
                tracing::error!(
                    key = %state_key,
                    fire_time = %fire_time,
                    "the last claimed fire recorded in Redis lies more than {CLAIM_AHEAD_TOLERANCE:?} ahead of the Redis server's clock (a replica's clock was ahead, or the server's clock was set back); it was ignored so that it does not silence the job. Run NTP on every host and on the Redis server"
                );
            }
            let value = u64::try_from(value).unwrap_or(0);
            if let (2, Some(wait), Some(acked)) = (code, &wait, acked) {
                if !wait.enough(acked) {
                    // The lock stays with this claimant: the job's model retries the claim, which
                    // is recognised as the same claimant and waits again, or abandons it.
                    return Err(failure::not_replicated(acked, wait.wait.replicas));
                }
            }
            Ok(match code {
                0 => Claim::AlreadyRan,
                7 => Claim::ClaimedByAnother,
                8 => Claim::DroppedByAnother,
                1 => Claim::Busy {
                    first_report: value == 1,
                },
                6 => Claim::Paused {
                    pause: parse_pause(&state_key, paused.as_deref().unwrap_or(""))?,
                    first_report: value == 1,
                },
                3 => Claim::Lapsed,
                5 => Claim::Superseded,
                4 => Claim::TooEarly {
                    ahead: Duration::from_millis(value),
                },
                2 => Claim::Acquired(Box::new(RedisLease {
                    batcher,
                    wait,
                    lock_key,
                    cancel_key,
                    token,
                    fencing_token: value,
                    lease,
                    sent_at,
                })),
                other => {
                    return Err(GuardError::invalid(format!(
                        "the claim script answered {other}, which this version of cronguard does not know; run one version of cronguard against one Redis key prefix, or set another prefix with `Builder::redis_prefix`"
                    )))
                }
            })
        })
    }

    fn report_drop(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<DropReport, GuardError>> {
        let batcher = Arc::clone(&self.batcher);
        let fire = epoch_millis(fire_time);
        let key = Arg::Joined(Arc::clone(&self.reported_prefix), fire);
        let state = Arg::Shared(Arc::clone(&self.state_key));
        let nonce = Arg::Shared(Arc::clone(&self.nonce));
        Box::pin(async move {
            let op = batch::Op {
                code: op::FIRST_REPORT,
                keys: vec![key, state],
                args: vec![nonce, Arg::Int(REPORT_TTL_MS as i64), Arg::Int(fire)],
            };
            match call_one(&batcher, op).await? {
                0 => Ok(DropReport::ReportedElsewhere),
                1 => Ok(DropReport::First),
                2 => Ok(DropReport::ClaimedElsewhere),
                other => Err(GuardError::invalid(format!(
                    "the report script answered {other}, which this version of cronguard does not know; run one version of cronguard against one Redis key prefix, or set another prefix with `Builder::redis_prefix`"
                ))),
            }
        })
    }

    fn abandon(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<(), GuardError>> {
        let batcher = Arc::clone(&self.batcher);
        let fire = epoch_millis(fire_time);
        let op = batch::Op {
            code: op::ABANDON,
            keys: vec![
                Arg::Shared(Arc::clone(&self.lock_key)),
                Arg::Shared(Arc::clone(&self.state_key)),
                Arg::Shared(Arc::clone(&self.cancel_key)),
            ],
            args: vec![
                Arg::Int(fire),
                Arg::Joined(Arc::clone(&self.token_prefix), fire),
            ],
        };
        Box::pin(async move {
            call_one(&batcher, op).await?;
            Ok(())
        })
    }

    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let state_key = Arc::clone(&self.state_key);
        let mut conn = self.conn.clone();
        Box::pin(async move {
            let fields: Vec<Option<String>> = redis::cmd("HMGET")
                .arg(&*state_key)
                .arg(&[
                    "last", "lapsed", "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7",
                ])
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?;
            let number = |i: usize| {
                fields
                    .get(i)
                    .and_then(|v| v.as_deref())
                    .and_then(|v| v.parse::<i64>().ok())
            };
            let (last, lapsed) = (number(0), number(1));
            let horizon = Utc::now().timestamp_millis() + CLAIM_AHEAD_TOLERANCE_MS as i64;
            let last = match last {
                // Far ahead of the clock (the server's clock was set back): `last` never moves
                // back, and the newest claim the ring remembers up to now answers.
                Some(l) if l > horizon => fields
                    .iter()
                    .skip(2)
                    .flatten()
                    .filter_map(|entry| entry.split(' ').next()?.parse::<i64>().ok())
                    .filter(|f| *f <= horizon)
                    .max(),
                // A last claim given up unstarted says nothing about which earlier fire ran.
                last => last.filter(|l| lapsed != Some(*l)),
            };
            Ok(last.and_then(DateTime::<Utc>::from_timestamp_millis))
        })
    }

    fn fate_point(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let batcher = Arc::clone(&self.batcher);
        let op = batch::Op {
            code: op::FATE_POINT,
            keys: vec![Arg::Shared(Arc::clone(&self.state_key))],
            args: vec![],
        };
        Box::pin(async move { point_answer(batcher.call(op).await.map_err(redis_err)?) })
    }

    fn report_missed(
        &self,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
    ) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let batcher = Arc::clone(&self.batcher);
        let last = epoch_millis(last);
        let op = batch::Op {
            code: op::REPORT_MISSED,
            keys: vec![
                Arg::Shared(Arc::clone(&self.state_key)),
                Arg::Joined(Arc::clone(&self.missed_prefix), last),
            ],
            args: vec![
                Arg::Int(epoch_millis(first)),
                Arg::Int(last),
                Arg::Int(CLAIM_AHEAD_TOLERANCE_MS as i64 - self.grace_ms()),
                Arg::Int(REPORT_TTL_MS as i64),
            ],
        };
        Box::pin(async move { point_answer(batcher.call(op).await.map_err(redis_err)?) })
    }

    fn server_time(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let mut conn = self.conn.clone();
        let state_key = Arc::clone(&self.state_key);
        Box::pin(async move {
            let time = redis::cmd("TIME");
            // The clock that judges this job's claims is that of the node owning its keys.
            let reply = match conn.cluster().await.map_err(redis_err)? {
                Some(mut cluster) => cluster::on_primary_of(&mut cluster, &state_key, &time).await,
                None => conn.req_packed_command(&time).await,
            }
            .map_err(redis_err)?;
            let (secs, micros): (i64, i64) =
                redis::from_redis_value(reply).map_err(|e| redis_err(e.into()))?;
            Ok(DateTime::<Utc>::from_timestamp(secs, 0)
                .map(|t| t + chrono::TimeDelta::microseconds(micros)))
        })
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
        (self.history_kept.kept > 0).then_some(self as &dyn GuardHistory)
    }
}

impl GuardHistory for RedisGuard {
    fn record(&self, entry: HistoryEntry) -> BoxFuture<Result<(), GuardError>> {
        let batcher = Arc::clone(&self.batcher);
        let duration = entry
            .started
            .zip(entry.ended)
            .and_then(|(started, ended)| (ended - started).to_std().ok());
        let op = batch::Op {
            code: op::HISTORY,
            keys: vec![Arg::Shared(Arc::clone(&self.history_key))],
            args: vec![
                Arg::Int(epoch_millis(entry.fire_time)),
                Arg::Owned(crate::history::line::tail(&entry, duration)),
                Arg::Int(i64::try_from(self.history_kept.kept).unwrap_or(i64::MAX)),
                Arg::Int(
                    i64::try_from(self.history_kept.retention.as_millis()).unwrap_or(i64::MAX),
                ),
            ],
        };
        Box::pin(async move {
            call_one(&batcher, op).await?;
            Ok(())
        })
    }

    fn read(&self, since: DateTime<Utc>) -> BoxFuture<Result<Vec<HistoryEntry>, GuardError>> {
        let key = Arc::clone(&self.history_key);
        let job = Arc::clone(&self.job);
        let mut conn = self.conn.clone();
        // Entries past the retention are dropped only once the job has more than it keeps.
        let retention = i64::try_from(self.history_kept.retention.as_millis()).unwrap_or(i64::MAX);
        let from = epoch_millis(since).max(epoch_millis(Utc::now()).saturating_sub(retention));
        Box::pin(async move {
            let lines: Vec<String> = redis::cmd("ZRANGEBYSCORE")
                .arg(&*key)
                .arg(from)
                .arg("+inf")
                .arg("LIMIT")
                .arg(0)
                .arg(HISTORY_LIMIT)
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?;
            Ok(lines
                .iter()
                .filter_map(|l| crate::history::line::parse(&job, l))
                .collect())
        })
    }
}

impl GuardControls for RedisGuard {
    fn set_pause(&self, pause: Option<Pause>) -> BoxFuture<Result<(), GuardError>> {
        let state_key = Arc::clone(&self.state_key);
        let mut conn = self.conn.clone();
        Box::pin(async move {
            let cmd = match &pause {
                Some(pause) => {
                    let mut cmd = redis::cmd("HSET");
                    cmd.arg(&*state_key).arg("paused").arg(format_pause(pause));
                    cmd
                }
                None => {
                    let mut cmd = redis::cmd("HDEL");
                    cmd.arg(&*state_key).arg("paused");
                    cmd
                }
            };
            let _: i64 = cmd.query_async(&mut conn).await.map_err(redis_err)?;
            Ok(())
        })
    }

    fn pause(&self) -> BoxFuture<Result<Option<Pause>, GuardError>> {
        let state_key = Arc::clone(&self.state_key);
        let mut conn = self.conn.clone();
        Box::pin(async move {
            let stored: Option<String> = redis::cmd("HGET")
                .arg(&*state_key)
                .arg("paused")
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?;
            stored
                .map(|stored| parse_pause(&state_key, &stored))
                .transpose()
        })
    }

    fn claim_manual(&self, run: ManualRun) -> BoxFuture<Result<Claim, GuardError>> {
        let batcher = Arc::clone(&self.batcher);
        let lock_key = Arc::clone(&self.lock_key);
        let state_key = Arc::clone(&self.state_key);
        let cancel_key = Arc::clone(&self.cancel_key);
        let manual_key = Arc::clone(&self.manual_key);
        let lease = self.lease;
        let misfire_grace = self.misfire_grace;
        let grace = misfire_grace.as_millis().to_string();
        // The same for every claim of this run by this guard value; never a scheduled fire's.
        let token = Arg::Owned(format!("{}:manual:{:016x}", self.nonce, run.id));
        let wait = self.wait.clone();
        Box::pin(async move {
            let px = px_arg(lease)?;
            let sent_at = Instant::now();
            let op = batch::Op {
                code: op::MANUAL,
                keys: vec![
                    Arg::Shared(Arc::clone(&lock_key)),
                    Arg::Shared(Arc::clone(&state_key)),
                    Arg::Shared(manual_key),
                ],
                args: vec![
                    Arg::Owned(format!("{:016x}", run.id)),
                    token.clone(),
                    px,
                    Arg::Owned(epoch_millis(run.requested_at).to_string()),
                    Arg::Owned(grace),
                ],
            };
            // Like a scheduled claim: a run starts only once the replicas have its claim.
            let (value, acked) = claim_op(&batcher, wait.as_deref(), op, &state_key).await?;
            let (code, value) = match answer(value)?[..] {
                [code, value, _] => (code, value),
                ref other => {
                    return Err(GuardError::invalid(format!(
                        "the manual claim answered {other:?}; run one version of cronguard against one Redis key prefix, or set another prefix with `Builder::redis_prefix`"
                    )))
                }
            };
            if let (2, Some(wait), Some(acked)) = (code, &wait, acked) {
                if !wait.enough(acked) {
                    // As for a scheduled claim: the model retries it as the same claimant until
                    // the run's grace runs out, then reports it. A manual run is not abandoned
                    // through the guard, so its lock is cut down to what is left of that grace
                    // (and the clocks' tolerance) instead of holding up the job for a lease.
                    let left = run.requested_at + misfire_grace - Utc::now();
                    let px = (left.num_milliseconds() + CLAIM_AHEAD_TOLERANCE_MS as i64)
                        .clamp(1, i64::try_from(lease.as_millis()).unwrap_or(i64::MAX));
                    let shorten = batch::Op {
                        code: op::RENEW,
                        keys: vec![Arg::Shared(lock_key), Arg::Shared(cancel_key)],
                        args: vec![token, Arg::Int(px)],
                    };
                    let cmd = batch::Op::script_call(std::iter::once(&shorten));
                    // On the claims' connection, so that it lands before a retry of the claim;
                    // if it fails, the lock only lasts its lease.
                    let _ = batch::run_script(&mut wait.claims.clone(), &cmd).await;
                    return Err(failure::not_replicated(acked, wait.wait.replicas));
                }
            }
            Ok(match code {
                0 => Claim::AlreadyRan,
                1 => Claim::Busy { first_report: true },
                3 => Claim::Lapsed,
                9 => Claim::TooLate {
                    late: Duration::from_millis(u64::try_from(value).unwrap_or(0)),
                },
                2 => Claim::Acquired(Box::new(RedisLease {
                    batcher,
                    wait,
                    lock_key,
                    cancel_key,
                    token,
                    fencing_token: u64::try_from(value).unwrap_or(0),
                    lease,
                    sent_at,
                })),
                other => {
                    return Err(GuardError::invalid(format!(
                        "the manual claim answered {other}, which this version of cronguard does not know; run one version of cronguard against one Redis key prefix, or set another prefix with `Builder::redis_prefix`"
                    )))
                }
            })
        })
    }
}

/// A renewal's answer: `0` the lease is gone, `2` renewed with a request to stop, else renewed.
fn renewal(code: i64) -> Renewal {
    match code {
        0 => Renewal::Lost,
        2 => Renewal::CancelRequested,
        _ => Renewal::Renewed,
    }
}

struct RedisLease {
    batcher: Arc<Batcher>,
    /// When set, a renewal extends the lease only once the replicas acknowledged it.
    wait: Option<Arc<Replication>>,
    lock_key: Arc<str>,
    cancel_key: Arc<str>,
    token: Arg,
    fencing_token: u64,
    lease: Duration,
    sent_at: Instant,
}

impl Lease for RedisLease {
    fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    fn expiry(&self) -> Option<(Duration, Instant)> {
        Some((self.lease, self.sent_at))
    }

    fn renew(&self) -> BoxFuture<Result<Renewal, GuardError>> {
        let batcher = Arc::clone(&self.batcher);
        let keys = vec![
            Arg::Shared(Arc::clone(&self.lock_key)),
            Arg::Shared(Arc::clone(&self.cancel_key)),
        ];
        let token = self.token.clone();
        let lease = self.lease;
        let wait = self.wait.clone();
        Box::pin(async move {
            let px = px_arg(lease)?;
            let op = batch::Op {
                code: op::RENEW,
                keys,
                args: vec![token, px],
            };
            let Some(wait) = wait else {
                return Ok(renewal(call_one(&batcher, op).await?));
            };
            let (value, acked) = wait
                .renewals
                .call_acknowledged(op)
                .await
                .map_err(redis_err)?;
            let code = answer(value)?.first().copied().ok_or_else(|| {
                GuardError::invalid("the batch script answered nothing".to_owned())
            })?;
            let acked = acked.unwrap_or(0);
            if code != 0 && !wait.enough(acked) {
                // The primary extended the lock, but a failover now would promote a replica
                // that holds the lease as of the last acknowledged renewal: the watchdog keeps
                // counting from that one (a cancel request is told by the next renewal that is
                // acknowledged; its key lives as long as the lease).
                return Err(failure::renewal_not_replicated(acked, wait.wait.replicas));
            }
            Ok(renewal(code))
        })
    }

    fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>> {
        Box::pin(async move {
            let RedisLease {
                batcher,
                lock_key,
                cancel_key,
                token,
                ..
            } = *self;
            let op = batch::Op {
                code: op::RELEASE,
                keys: vec![Arg::Shared(lock_key), Arg::Shared(cancel_key)],
                args: vec![token],
            };
            call_one(&batcher, op).await?;
            Ok(())
        })
    }
}

/// The conformance suite against the Redis guard on `conn`, every job's guard sharing one batcher
/// as in a scheduler; a failure panics with its report.
#[cfg(test)]
pub(crate) async fn passes_the_suite(conn: RedisConn) -> super::conformance::Report {
    let batcher = Batcher::new(conn.clone());
    let report = super::conformance::check(|spec| {
        Arc::new(
            RedisGuard::new(
                conn.clone(),
                Arc::clone(&batcher),
                "cronguard",
                &spec.job,
                spec.lease,
                spec.overlap,
            )
            .with_misfire_grace(spec.misfire_grace),
        )
    })
    .await
    .unwrap_or_else(|failure| panic!("{failure}"));
    assert!(report.skipped.is_empty(), "{report}");
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_out_of_range_is_refused_not_truncated() {
        assert_eq!(lease_px(Duration::from_secs(30)).ok(), Some(30_000));
        for lease in [
            Duration::from_millis(1),
            Duration::from_secs(u64::MAX),
            // 2^64 ms + 5 ms: `as u64` would make it a 5 ms lease.
            Duration::from_millis(u64::MAX) + Duration::from_millis(6),
        ] {
            let err = lease_px(lease).expect_err("out of range").to_string();
            assert!(err.contains("from 100ms to 24h"), "{err}");
        }
    }
}
