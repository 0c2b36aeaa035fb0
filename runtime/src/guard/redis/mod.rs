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
//!   were claimed, and a fire that nobody claimed before a later one is told apart (`Superseded`)
//!   from one that ran (`AlreadyRan`)) and `lapsed` (a last claimed fire that was given up unstarted:
//!   its claimant's reply was lost, or it came too late to run; the health check does not count it
//!   as run);
//! - `<prefix>:{<job>}:reported:<fire ms>`: the nonce of the guard value that first reported
//!   fire `<fire ms>` as dropped, with `PX` of one hour, so that a drop seen by several replicas
//!   is reported at warn level once. One key per fire: a report of fire 5 after one of fire 7 is
//!   a first report too. A busy claim writes it only for `overlap = "skip"`, where the busy fire
//!   is dropped; under `queue` and `replace` the fire waits, and its misfire, if it comes to
//!   that, is reported through `first_report`;
//! - `<prefix>:{<job>}:cancel`: the token of a holder that another replica asked to stop
//!   (`overlap = "replace"`), with `PX lease`; the holder reads it when it renews.
//!
//! A claim is one script, one round trip. It reads the server's `TIME` and refuses a fire further
//! ahead of it than [`CLAIM_AHEAD_TOLERANCE`] (`TooEarly`, nothing written), so that one replica
//! with a clock far ahead cannot record a future fire that would make every replica's claims
//! `AlreadyRan`; a recorded fire that far ahead is ignored (and logged at error level). A release
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

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::aio::ConnectionLike;
use redis::{Cmd, RedisError, Script, ServerErrorKind, Value};
use tokio::time::Instant;

use super::{Claim, Guard, GuardError, Lease, Renewal};
use crate::clock::epoch_millis;
use crate::options::Overlap;
use crate::registry::BoxFuture;

mod cluster;
#[cfg(test)]
mod cluster_tests;
mod connection;

pub(crate) use connection::{connect, open, Open, RedisConn};

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

/// Lua helper of the claim and abandon scripts: who claimed `fire` among the recent claims, and
/// the oldest fire they hold. The state hash keeps the last eight claims in a ring of fields
/// `r0`..`r7` (`<fire> <token>`), written at `n % 8` with `n` the number of claims, so that a
/// claim writes two short fields and parses nothing; the ring is read only when a later fire was
/// claimed since (a retry after a lost reply, a late process).
const RECENT: &str = r#"
local function recent_claimant(state_key, fire)
  local ring = redis.call('HMGET', state_key, 'r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7')
  local who, oldest = false, nil
  for i = 1, 8 do
    if ring[i] then
      local f, t = string.match(ring[i], '^(%S+) (%S+)$')
      f = tonumber(f)
      if f then
        if f == fire then who = t end
        if not oldest or f < oldest then oldest = f end
      end
    end
  end
  return who, oldest
end
"#;

/// KEYS: lock, state, cancel, the report record of this fire. ARGV: fire (Unix ms), the
/// claimant's token, lease (ms), `1` for `overlap = "replace"`, the ahead tolerance (ms), `1` for
/// `overlap = "skip"` (a busy fire is dropped, so the claim records its report), the guard
/// value's nonce, the report record's TTL (ms).
///
/// Answers `{answer, value, ignored}`: answer `0` already ran, `1` busy (value: first report),
/// `2` acquired (value: the fencing token), `3` lapsed (this claimant's own claim of the fire
/// took effect and its lease is gone), `4` too early (value: ms ahead of the server's clock),
/// `5` superseded (nobody claimed this fire, and a later one was claimed); `ignored` is `1` when a
/// recorded `last` far ahead of the server's clock was ignored.
const CLAIM_BODY: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fire = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[5])
if fire > now + tolerance then
  return {4, fire - now, 0}
end
local state = redis.call('HMGET', KEYS[2], 'last', 'fence', 'holder', 'n')
local last = tonumber(state[1])
local ignored = 0
if last and last > now + tolerance then
  last = nil
  ignored = 1
end
-- Who claimed this fire: the hash names the last claim's holder; an older fire's claimant is
-- looked up in the recent claims only when a later fire was claimed since (a retry, a late process).
local claimed_by, oldest = false, nil
if last == fire then
  claimed_by = state[3]
elseif last and last > fire then
  claimed_by, oldest = recent_claimant(KEYS[2], fire)
end
if claimed_by == ARGV[2] then
  if redis.call('GET', KEYS[1]) ~= ARGV[2] then
    if last == fire then
      redis.call('HSET', KEYS[2], 'lapsed', ARGV[1])
    end
    return {3, 0, ignored}
  end
  local fence = tonumber(state[2])
  if not fence then
    return redis.error_reply('the hash ' .. KEYS[2] .. ' holds no valid fencing token; delete it to reset the job')
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {2, fence, ignored}
end
if last and last >= fire then
  if last > fire and not claimed_by and oldest and fire > oldest then
    return {5, 0, ignored}
  end
  return {0, 0, ignored}
end
if not redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[3]) then
  if ARGV[4] == '1' then
    redis.call('SET', KEYS[3], redis.call('GET', KEYS[1]), 'PX', ARGV[3])
  end
  if ARGV[6] ~= '1' then
    return {1, 0, ignored}
  end
  if redis.call('SET', KEYS[4], ARGV[7], 'NX', 'PX', ARGV[8]) or redis.call('GET', KEYS[4]) == ARGV[7] then
    return {1, 1, ignored}
  end
  return {1, 0, ignored}
end
local token = math.max((tonumber(state[2]) or 0) + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
local n = tonumber(state[4]) or 0
redis.call('HSET', KEYS[2], 'last', ARGV[1], 'fence', string.format('%.0f', token), 'holder', ARGV[2],
  'n', n + 1, 'r' .. (n % 8), ARGV[1] .. ' ' .. ARGV[2])
return {2, token, ignored}
"#;

/// KEYS: lock, state, cancel. ARGV: fire (Unix ms), the claimant's token. If this claimant's
/// claim of the fire took effect, its lock is freed and, when it is the last claimed fire, it is
/// recorded as not started (`lapsed`).
const ABANDON_BODY: &str = r#"
local state = redis.call('HMGET', KEYS[2], 'last', 'holder')
local fire = tonumber(ARGV[1])
local last = tonumber(state[1])
local ours = (last == fire and state[2] == ARGV[2]) or recent_claimant(KEYS[2], fire) == ARGV[2]
if not ours then
  return 0
end
if last == fire then
  redis.call('HSET', KEYS[2], 'lapsed', ARGV[1])
end
if redis.call('GET', KEYS[1]) == ARGV[2] then
  redis.call('DEL', KEYS[1], KEYS[3])
end
return 1
"#;

const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1], KEYS[2])
end
return 0
"#;

const RENEW: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if redis.call('GET', KEYS[2]) == ARGV[1] then
    return 2
  end
  return 1
end
return 0
"#;

/// KEYS: the report record of the fire. ARGV: the guard value's nonce, the record's TTL (ms).
/// `1` when this guard value is the first to report the fire (also when it asks again).
const FIRST_REPORT: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) or redis.call('GET', KEYS[1]) == ARGV[1] then
  return 1
end
return 0
"#;

/// The scripts, loaded once per process and run by SHA (reloaded after a Redis restart).
pub(crate) struct Scripts {
    claim: Script,
    release: Script,
    renew: Script,
    first_report: Script,
    abandon: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            claim: Script::new(&format!("{RECENT}{CLAIM_BODY}")),
            release: Script::new(RELEASE),
            renew: Script::new(RENEW),
            first_report: Script::new(FIRST_REPORT),
            abandon: Script::new(&format!("{RECENT}{ABANDON_BODY}")),
        }
    }
}

/// How many replicas must acknowledge an acquired claim, and how long the primary waits for
/// them (`WAIT replicas timeout`): [`Builder::redis_wait_for_replicas`](crate::Builder::redis_wait_for_replicas).
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

pub(crate) struct RedisGuard {
    conn: RedisConn,
    /// Replicas an acquired claim must reach before the run may start.
    wait: Option<ReplicaWait>,
    /// Random, made once per guard value: with a fire's time it makes the lock token, so that a
    /// claim repeated by this guard value (its reply was lost) is recognised as the same claimant.
    nonce: Arc<str>,
    scripts: Arc<Scripts>,
    lock_key: Arc<str>,
    state_key: Arc<str>,
    cancel_key: Arc<str>,
    /// `<prefix>:{<job>}:reported:`, followed by a fire's Unix ms.
    reported_prefix: Arc<str>,
    lease: Duration,
    replace: bool,
    /// `overlap = "skip"`: a busy fire is dropped, so the claim records its report.
    skip: bool,
}

impl RedisGuard {
    pub(crate) fn new(
        conn: RedisConn,
        scripts: Arc<Scripts>,
        prefix: &str,
        job: &str,
        lease: Duration,
        overlap: Overlap,
    ) -> Self {
        RedisGuard {
            conn,
            wait: None,
            nonce: Arc::from(format!(
                "{:016x}{:016x}",
                fastrand::u64(..),
                fastrand::u64(..)
            )),
            scripts,
            lock_key: Arc::from(format!("{prefix}:{{{job}}}:lock")),
            state_key: Arc::from(format!("{prefix}:{{{job}}}:state")),
            cancel_key: Arc::from(format!("{prefix}:{{{job}}}:cancel")),
            reported_prefix: Arc::from(format!("{prefix}:{{{job}}}:reported:")),
            lease,
            replace: overlap == Overlap::Replace,
            skip: overlap == Overlap::Skip,
        }
    }

    /// Acquired claims must reach `wait.replicas` replicas before their run starts.
    pub(crate) fn waiting_for_replicas(mut self, wait: Option<ReplicaWait>) -> Self {
        self.wait = wait;
        self
    }
}

fn redis_err(e: redis::RedisError) -> GuardError {
    GuardError::Redis(e)
}

/// Sends `evalsha` and `WAIT` in one pipeline to the primary of `key` and answers the script's
/// reply and the number of replicas that acknowledged. On a cluster, `WAIT` alone would go to
/// every primary, so the pipeline is routed by `key`; the cluster client follows `MOVED` and
/// `ASK` inside a pipeline too. A pipeline's errors come back as values: `NOSCRIPT` loads the
/// script and sends the pipeline once more.
async fn claim_and_wait(
    conn: &mut RedisConn,
    script: &Script,
    evalsha: Cmd,
    key: &str,
    wait: ReplicaWait,
) -> Result<(Value, u64), RedisError> {
    let timeout_ms = u64::try_from(wait.timeout.as_millis()).unwrap_or(u64::MAX);
    let mut pipe = redis::pipe();
    pipe.add_command(evalsha).add_command(
        redis::cmd("WAIT")
            .arg(wait.replicas)
            .arg(timeout_ms)
            .clone(),
    );
    let mut loaded = false;
    loop {
        let values = match conn.cluster().await? {
            None => conn.req_packed_commands(&pipe, 0, 2).await?,
            Some(mut cluster) => {
                cluster::pipeline_to(&mut cluster, &pipe, cluster::primary_of(key)).await?
            }
        };
        let mut values = values.into_iter();
        let (Some(reply), Some(acked)) = (values.next(), values.next()) else {
            return Err(RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "the claim and its WAIT did not both answer",
            )));
        };
        match reply {
            Value::ServerError(e) => {
                let e = RedisError::from(e);
                if loaded || e.kind() != redis::ErrorKind::Server(ServerErrorKind::NoScript) {
                    return Err(e);
                }
                script.load_async(conn).await?;
                loaded = true;
            }
            reply => return Ok((reply, redis::from_redis_value(acked)?)),
        }
    }
}

/// The lease as Redis `PX` milliseconds. `Job::problems` and the macro keep leases within
/// `MIN_LEASE..=MAX_LEASE`; this refuses anything else rather than cut it down to a wrong
/// expiry.
fn lease_px(lease: Duration) -> Result<u64, GuardError> {
    cronguard_schedule::check_lease(lease)
        .and_then(|()| u64::try_from(lease.as_millis()).map_err(|e| e.to_string()))
        .map_err(|e| GuardError::Invalid(format!("the lease of {lease:?} {e}")))
}

impl Guard for RedisGuard {
    fn claim(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        let mut conn = self.conn.clone();
        let scripts = Arc::clone(&self.scripts);
        let lock_key = Arc::clone(&self.lock_key);
        let state_key = Arc::clone(&self.state_key);
        let cancel_key = Arc::clone(&self.cancel_key);
        let lease = self.lease;
        let replace = self.replace;
        let skip = self.skip;
        let nonce = Arc::clone(&self.nonce);
        let fire = epoch_millis(fire_time);
        let reported_key = format!("{}{fire}", self.reported_prefix);
        // The same for every claim of this fire by this guard value.
        let token = format!("{}:{fire}", self.nonce);
        let wait = self.wait;
        Box::pin(async move {
            let px = lease_px(lease)?;
            // The lock's expiry on the server is at least a lease after this instant, also when
            // this claim repeats one that took effect (the script extends the lock then).
            let sent_at = Instant::now();
            let mut evalsha = redis::cmd("EVALSHA");
            evalsha
                .arg(scripts.claim.get_hash())
                .arg(4)
                .arg(&*lock_key)
                .arg(&*state_key)
                .arg(&*cancel_key)
                .arg(&reported_key)
                .arg(fire)
                .arg(&token)
                .arg(px)
                .arg(if replace { "1" } else { "0" })
                .arg(CLAIM_AHEAD_TOLERANCE_MS)
                .arg(if skip { "1" } else { "0" })
                .arg(&*nonce)
                .arg(REPORT_TTL_MS);
            let (answer, value, ignored, acked): (i64, u64, i64, Option<u64>) = match wait {
                None => {
                    let (answer, value, ignored) = match evalsha.query_async(&mut conn).await {
                        Err(e)
                            if e.kind() == redis::ErrorKind::Server(ServerErrorKind::NoScript) =>
                        {
                            scripts
                                .claim
                                .load_async(&mut conn)
                                .await
                                .map_err(redis_err)?;
                            evalsha.query_async(&mut conn).await
                        }
                        reply => reply,
                    }
                    .map_err(redis_err)?;
                    (answer, value, ignored, None)
                }
                Some(wait) => {
                    let (reply, acked) =
                        claim_and_wait(&mut conn, &scripts.claim, evalsha, &state_key, wait)
                            .await
                            .map_err(redis_err)?;
                    let (answer, value, ignored) =
                        redis::from_redis_value(reply).map_err(|e| redis_err(e.into()))?;
                    (answer, value, ignored, Some(acked))
                }
            };
            if ignored == 1 {
                tracing::error!(
                    key = %state_key,
                    fire_time = %fire_time,
                    "the last claimed fire recorded in Redis lies more than {CLAIM_AHEAD_TOLERANCE:?} ahead of the Redis server's clock (a replica's clock was ahead, or the server's clock was set back); it was ignored so that it does not silence the job. Run NTP on every host and on the Redis server"
                );
            }
            if let (2, Some(wait), Some(acked)) = (answer, wait, acked) {
                if acked < u64::from(wait.replicas) {
                    // The lock stays with this claimant: the job's model retries the claim, which
                    // is recognised as the same claimant and waits again, or abandons it.
                    return Err(GuardError::NotReplicated {
                        acked,
                        wanted: wait.replicas,
                    });
                }
            }
            Ok(match answer {
                0 => Claim::AlreadyRan,
                1 => Claim::Busy {
                    first_report: value == 1,
                },
                3 => Claim::Lapsed,
                5 => Claim::Superseded,
                4 => Claim::TooEarly {
                    ahead: Duration::from_millis(value),
                },
                2 => Claim::Acquired(Box::new(RedisLease {
                    conn,
                    scripts,
                    lock_key,
                    cancel_key,
                    token,
                    fencing_token: value,
                    lease,
                    sent_at,
                })),
                other => {
                    return Err(GuardError::Invalid(format!(
                        "the claim script answered {other}, which this version of cronguard does not know; run one version of cronguard against one Redis key prefix, or set another prefix with `Builder::redis_prefix`"
                    )))
                }
            })
        })
    }

    fn first_report(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<bool, GuardError>> {
        let mut conn = self.conn.clone();
        let scripts = Arc::clone(&self.scripts);
        let key = format!("{}{}", self.reported_prefix, epoch_millis(fire_time));
        let nonce = Arc::clone(&self.nonce);
        Box::pin(async move {
            let first: i64 = scripts
                .first_report
                .key(&key)
                .arg(&*nonce)
                .arg(REPORT_TTL_MS)
                .invoke_async(&mut conn)
                .await
                .map_err(redis_err)?;
            Ok(first == 1)
        })
    }

    fn abandon(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<(), GuardError>> {
        let mut conn = self.conn.clone();
        let scripts = Arc::clone(&self.scripts);
        let fire = epoch_millis(fire_time);
        let keys = [
            self.lock_key.to_string(),
            self.state_key.to_string(),
            self.cancel_key.to_string(),
        ];
        let token = format!("{}:{fire}", self.nonce);
        Box::pin(async move {
            let _: i64 = scripts
                .abandon
                .key(&keys[..])
                .arg(fire)
                .arg(&token)
                .invoke_async(&mut conn)
                .await
                .map_err(redis_err)?;
            Ok(())
        })
    }

    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let state_key = Arc::clone(&self.state_key);
        let mut conn = self.conn.clone();
        Box::pin(async move {
            let (last, lapsed): (Option<i64>, Option<i64>) = redis::cmd("HMGET")
                .arg(&*state_key)
                .arg("last")
                .arg("lapsed")
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?;
            // A last claim given up unstarted says nothing about which earlier fire ran.
            let last = last.filter(|l| lapsed != Some(*l));
            Ok(last.and_then(DateTime::<Utc>::from_timestamp_millis))
        })
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
}

struct RedisLease {
    conn: RedisConn,
    scripts: Arc<Scripts>,
    lock_key: Arc<str>,
    cancel_key: Arc<str>,
    token: String,
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
        let mut conn = self.conn.clone();
        let scripts = Arc::clone(&self.scripts);
        let lock_key = Arc::clone(&self.lock_key);
        let cancel_key = Arc::clone(&self.cancel_key);
        let token = self.token.clone();
        let lease = self.lease;
        Box::pin(async move {
            let px = lease_px(lease)?;
            let answer: i64 = scripts
                .renew
                .key(&*lock_key)
                .key(&*cancel_key)
                .arg(&token)
                .arg(px)
                .invoke_async(&mut conn)
                .await
                .map_err(redis_err)?;
            Ok(match answer {
                0 => Renewal::Lost,
                2 => Renewal::CancelRequested,
                _ => Renewal::Renewed,
            })
        })
    }

    fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let _released: i64 = self
                .scripts
                .release
                .key(&*self.lock_key)
                .key(&*self.cancel_key)
                .arg(&self.token)
                .invoke_async(&mut conn)
                .await
                .map_err(redis_err)?;
            Ok(())
        })
    }
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
