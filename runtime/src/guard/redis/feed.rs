//! The control feed and the roster in Redis (see [`ControlFeed`]):
//!
//! - `<prefix>:controls`: a stream, one entry per request with the fields `job`, `action`
//!   (`pause`, `resume`, `trigger`), `argument` (who, or the manual run's id in hex) and `at` (Unix
//!   ms), trimmed to about the last 10,000 entries (`MAXLEN ~`);
//! - `<prefix>:roster`: a hash, field the job's name, value `<at ms>,<due grace ms> <length of
//!   instance> <instance><schedule>` (the length makes the split unambiguous whatever the texts
//!   hold); the due grace is the misfire grace plus the jitter, and a value an earlier version
//!   wrote has none (`<at ms> <length of instance> ...`);
//! - `<prefix>:processes`: a sorted set, member a process's id, score when it last attended
//!   (Unix ms of the server's clock);
//! - `<prefix>:{own:<group>}:members` and `<prefix>:{own:<group>}:leases`: partition ownership
//!   (docs/design/ownership.md): the processes of a group, scored like `processes`, and a hash
//!   of its partitions' leases, field the partition, value `<epoch> <expiry ms> <alive ms>
//!   <owner>` (`alive`: the owner's clock when it sent its last renewal). The
//!   two share a hash tag, so that one script reads and writes both on a Redis Cluster.
//!
//! The others are plain keys without a hash tag: on a Redis Cluster each lives on the node of
//! its own slot, and every other command here touches one key.
//!
//! A cursor is the id of the last entry read. Entry ids follow the server's clock, so a stream
//! deleted (`DEL`, `FLUSHALL`) and written again usually goes on above the cursor; but one
//! written again by a server whose clock is behind, or restored from another server, starts
//! below it. Each read asks for the stream's last entry in the same round trip, and reads the
//! stream from its start when that lies below the cursor, or when the stream is gone
//! ([`FeedRead::restarted`]). Only a stream that was written again past the cursor between two
//! reads (a second apart) by a server whose clock is behind by less than that goes unnoticed:
//! its entries below the cursor are then missed.

use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::Value;

use super::{redis_err, RedisConn};
use crate::guard::feed::{
    ControlAction, ControlFeed, ControlRequest, FeedRead, RosterEntry, SeenProcess, FEED_BATCH,
    PRESENCE_TTL,
};
use crate::guard::partitions::{Ownership, PartitionLease, MEMBER_TTL, PARTITIONS};
use crate::guard::GuardError;
use crate::registry::BoxFuture;

/// Entries the stream keeps, about (`XADD ... MAXLEN ~`).
const STREAM_LENGTH: u32 = 10_000;

/// The control feed and roster of the Redis guards under one key prefix.
pub(crate) struct RedisFeed {
    conn: RedisConn,
    stream: String,
    roster: String,
    processes: String,
    prefix: String,
}

impl RedisFeed {
    pub(crate) fn new(conn: RedisConn, prefix: &str) -> Self {
        RedisFeed {
            conn,
            stream: format!("{prefix}:controls"),
            roster: format!("{prefix}:roster"),
            processes: format!("{prefix}:processes"),
            prefix: prefix.to_owned(),
        }
    }
}

fn invalid(what: String) -> GuardError {
    GuardError::invalid(format!(
        "{what}; run one version of cronguard against one Redis key prefix, or set another prefix with `Builder::redis_prefix`"
    ))
}

/// One stream entry as a request; `None` (logged) for an entry this version cannot read, so that
/// one bad entry does not stop the feed.
fn request(stream: &str, id: &str, fields: &[String]) -> Option<ControlRequest> {
    let field = |name: &str| {
        fields
            .chunks_exact(2)
            .find(|pair| pair[0] == name)
            .map(|pair| pair[1].as_str())
    };
    let parsed = (|| {
        let at = DateTime::<Utc>::from_timestamp_millis(field("at")?.parse().ok()?)?;
        let action = ControlAction::parse(field("action")?, field("argument")?, at)?;
        Some(ControlRequest {
            job: field("job")?.to_owned(),
            action,
            at,
        })
    })();
    if parsed.is_none() {
        tracing::warn!(key = %stream, id = %id, "skipped a control request that this version of cronguard cannot read");
    }
    parsed
}

/// The cursor of a stream that holds nothing: every entry lies after it.
const START: &str = "0-0";

/// A stream entry id, `<ms>-<seq>`, as a pair that orders as the ids do.
fn parse_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

fn entries(stream: &str, value: Value) -> Result<Vec<(String, Vec<String>)>, GuardError> {
    redis::from_redis_value(value).map_err(|e| {
        invalid(format!(
            "the stream {stream} holds entries that are not cronguard's controls ({e})"
        ))
    })
}

/// The roster value of `entry` (see the module documentation).
fn roster_value(entry: &RosterEntry) -> String {
    let grace = entry
        .due_grace
        .map(|g| format!(",{}", g.as_millis()))
        .unwrap_or_default();
    format!(
        "{}{grace} {} {}{}",
        entry.at.timestamp_millis(),
        entry.instance.len(),
        entry.instance,
        entry.schedule
    )
}

fn roster_entry(job: String, value: &str) -> Option<RosterEntry> {
    let (head, rest) = value.split_once(' ')?;
    let (at, due_grace) = match head.split_once(',') {
        Some((at, grace)) => (at, Some(Duration::from_millis(grace.parse().ok()?))),
        None => (head, None),
    };
    let (len, rest) = rest.split_once(' ')?;
    let len: usize = len.parse().ok()?;
    let (instance, schedule) = (rest.get(..len)?, rest.get(len..)?);
    Some(RosterEntry {
        job,
        schedule: schedule.to_owned(),
        instance: instance.to_owned(),
        at: DateTime::<Utc>::from_timestamp_millis(at.parse().ok()?)?,
        due_grace,
    })
}

impl ControlFeed for RedisFeed {
    fn publish(&self, request: ControlRequest) -> BoxFuture<Result<(), GuardError>> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("XADD");
        cmd.arg(&self.stream)
            .arg("MAXLEN")
            .arg("~")
            .arg(STREAM_LENGTH)
            .arg("*")
            .arg("job")
            .arg(&request.job)
            .arg("action")
            .arg(request.action.word())
            .arg("argument")
            .arg(request.action.argument())
            .arg("at")
            .arg(request.at.timestamp_millis());
        Box::pin(async move {
            let _: String = cmd.query_async(&mut conn).await.map_err(redis_err)?;
            Ok(())
        })
    }

    fn read(&self, cursor: Option<String>) -> BoxFuture<Result<FeedRead, GuardError>> {
        let mut conn = self.conn.clone();
        let stream = self.stream.clone();
        Box::pin(async move {
            let last_entry = || {
                let mut cmd = redis::cmd("XREVRANGE");
                cmd.arg(&stream).arg("+").arg("-").arg("COUNT").arg(1);
                cmd
            };
            let Some(cursor) = cursor else {
                let last: Value = last_entry()
                    .query_async(&mut conn)
                    .await
                    .map_err(redis_err)?;
                let end = entries(&stream, last)?
                    .pop()
                    .map_or_else(|| START.to_owned(), |(id, _)| id);
                return Ok(FeedRead::on(Vec::new(), end));
            };
            let after = parse_id(&cursor).ok_or_else(|| {
                invalid(format!(
                    "the control feed's cursor `{cursor}` is not an entry id of the stream {stream}"
                ))
            })?;
            let range = |from: String| {
                let mut cmd = redis::cmd("XRANGE");
                cmd.arg(&stream)
                    .arg(from)
                    .arg("+")
                    .arg("COUNT")
                    .arg(FEED_BATCH);
                cmd
            };
            // One round trip: the stream's last entry, and what follows the cursor.
            let (last, read): (Value, Value) = redis::pipe()
                .add_command(last_entry())
                .add_command(range(format!("({cursor}")))
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?;
            let last = entries(&stream, last)?.pop().map(|(id, _)| id);
            let restarted = match last.as_deref().map(parse_id) {
                Some(Some(last)) => last < after,
                Some(None) => {
                    return Err(invalid(format!(
                        "the stream {stream} holds an entry id this version cannot read"
                    )))
                }
                // Gone: whatever is written next is new, whatever its id.
                None => after > (0, 0),
            };
            let (read, from) = if restarted {
                let read: Value = range(START.to_owned())
                    .query_async(&mut conn)
                    .await
                    .map_err(redis_err)?;
                (entries(&stream, read)?, START.to_owned())
            } else {
                (entries(&stream, read)?, cursor)
            };
            let next = read.last().map_or(from, |(id, _)| id.clone());
            let requests = read
                .iter()
                .filter_map(|(id, fields)| request(&stream, id, fields))
                .collect();
            Ok(FeedRead {
                requests,
                cursor: next,
                restarted,
            })
        })
    }

    fn announce(&self, jobs: Vec<RosterEntry>) -> BoxFuture<Result<(), GuardError>> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("HSET");
        cmd.arg(&self.roster);
        for entry in &jobs {
            cmd.arg(&entry.job).arg(roster_value(entry));
        }
        Box::pin(async move {
            if jobs.is_empty() {
                return Ok(());
            }
            let _: i64 = cmd.query_async(&mut conn).await.map_err(redis_err)?;
            Ok(())
        })
    }

    fn roster(&self) -> BoxFuture<Result<Vec<RosterEntry>, GuardError>> {
        let mut conn = self.conn.clone();
        let key = self.roster.clone();
        Box::pin(async move {
            let all: Vec<(String, String)> = redis::cmd("HGETALL")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?;
            let mut roster = Vec::with_capacity(all.len());
            for (job, value) in all {
                match roster_entry(job, &value) {
                    Some(entry) => roster.push(entry),
                    None => {
                        tracing::warn!(key = %key, value = %value, "skipped a roster entry that this version of cronguard cannot read")
                    }
                }
            }
            roster.sort_by(|a, b| a.job.cmp(&b.job));
            Ok(roster)
        })
    }

    fn attend(&self, process: &str) -> BoxFuture<Result<Vec<String>, GuardError>> {
        let mut conn = self.conn.clone();
        let ttl = i64::try_from(PRESENCE_TTL.as_millis()).unwrap_or(i64::MAX);
        let mut call = super::scripts::PRESENCE.prepare_invoke();
        call.key(&self.processes).arg(process).arg(ttl);
        Box::pin(async move {
            let present: Vec<String> = call.invoke_async(&mut conn).await.map_err(redis_err)?;
            Ok(present)
        })
    }

    fn leave(
        &self,
        group: &str,
        process: &str,
        _lease: Duration,
    ) -> BoxFuture<Result<(), GuardError>> {
        let mut conn = self.conn.clone();
        let mut call = super::scripts::LEAVE.prepare_invoke();
        call.key(format!("{}:{{own:{group}}}:members", self.prefix))
            .key(format!("{}:{{own:{group}}}:leases", self.prefix))
            .arg(process);
        Box::pin(async move {
            let _given_up: i64 = call.invoke_async(&mut conn).await.map_err(redis_err)?;
            Ok(())
        })
    }

    fn own(
        &self,
        group: &str,
        process: &str,
        wanted: &[u16],
        lease: Duration,
    ) -> BoxFuture<Result<Option<Ownership>, GuardError>> {
        let mut conn = self.conn.clone();
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let leases_key = format!("{}:{{own:{group}}}:leases", self.prefix);
        let mut call = super::scripts::OWN.prepare_invoke();
        call.key(format!("{}:{{own:{group}}}:members", self.prefix))
            .key(&leases_key)
            .arg(process)
            .arg(ms(MEMBER_TTL))
            .arg(ms(lease))
            .arg(Utc::now().timestamp_millis().max(0));
        for p in wanted {
            call.arg(p);
        }
        Box::pin(async move {
            let (now, members, flat): (String, Vec<String>, Vec<String>) =
                call.invoke_async(&mut conn).await.map_err(redis_err)?;
            let bad = |what: &str| {
                invalid(format!(
                    "the hash {leases_key} holds a partition lease `{what}` that this version cannot read"
                ))
            };
            let now: u64 = now
                .parse()
                .map_err(|_| invalid(format!("the server's clock `{now}` is not a time in ms")))?;
            let mut leases = Vec::with_capacity(flat.len() / 2);
            for pair in flat.chunks_exact(2) {
                let parsed = (|| {
                    let partition: u16 = pair[0].parse().ok()?;
                    let (epoch, rest) = pair[1].split_once(' ')?;
                    let (expiry, rest) = rest.split_once(' ')?;
                    let (alive, owner) = rest.split_once(' ')?;
                    let expiry: u64 = expiry.parse().ok()?;
                    Some(PartitionLease {
                        partition,
                        owner: owner.to_owned(),
                        epoch: epoch.parse().ok()?,
                        left: Duration::from_millis(expiry.saturating_sub(now)),
                        alive: DateTime::<Utc>::from_timestamp_millis(alive.parse().ok()?),
                    })
                })();
                match parsed {
                    Some(lease) if lease.partition < PARTITIONS => leases.push(lease),
                    _ => return Err(bad(&pair[1])),
                }
            }
            let server_time =
                DateTime::<Utc>::from_timestamp_millis(i64::try_from(now).unwrap_or(0));
            Ok(Some(Ownership {
                members,
                leases,
                server_time,
            }))
        })
    }

    fn processes(&self) -> BoxFuture<Result<Vec<SeenProcess>, GuardError>> {
        let mut conn = self.conn.clone();
        let key = self.processes.clone();
        let mut call = super::scripts::PROCESSES.prepare_invoke();
        call.key(&key);
        Box::pin(async move {
            let (now, listed): (String, Vec<String>) =
                call.invoke_async(&mut conn).await.map_err(redis_err)?;
            let ms = |text: &str| text.parse::<f64>().ok().filter(|ms| ms.is_finite());
            let now = ms(&now).ok_or_else(|| {
                invalid(format!("the server's clock `{now}` is not a time in ms"))
            })?;
            listed
                .chunks_exact(2)
                .map(|pair| {
                    let seen = ms(&pair[1]).ok_or_else(|| {
                        invalid(format!(
                            "the sorted set {key} holds a score `{}` that is not a time in ms",
                            pair[1]
                        ))
                    })?;
                    // Whole ms, never negative: the set holds ms of the server's clock.
                    let ago = Duration::from_millis((now - seen).max(0.0) as u64);
                    Ok(SeenProcess {
                        id: pair[0].clone(),
                        ago,
                    })
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roster_values_split_whatever_the_texts_hold() {
        let entry = RosterEntry {
            job: "report".to_owned(),
            schedule: "cron = \"0 * * * *\" tz = \"Europe/Berlin\"".to_owned(),
            instance: "web 1 (blue)".to_owned(),
            at: DateTime::<Utc>::from_timestamp_millis(1_700_000_000_123).expect("in range"),
            due_grace: Some(Duration::from_millis(90_500)),
        };
        let value = roster_value(&entry);
        assert_eq!(roster_entry("report".to_owned(), &value), Some(entry));
        assert_eq!(roster_entry("x".to_owned(), "12 99 short"), None);
        assert_eq!(roster_entry("x".to_owned(), "12,soon 1 aevery 1s"), None);
    }

    #[test]
    fn roster_values_of_earlier_versions_have_no_grace() {
        let entry = roster_entry("report".to_owned(), "1700000000123 1 aevery 1s").expect("reads");
        assert_eq!(
            (entry.instance.as_str(), entry.schedule.as_str()),
            ("a", "every 1s")
        );
        assert_eq!(entry.due_grace, None);
    }
}

#[cfg(test)]
mod server_tests {
    use super::*;
    use crate::control::ManualRun;
    use crate::guard::redis::{connect, RedisConn};
    use cronguard_testkit::{RedisCluster, RedisServer};

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp_millis(1_767_225_600_000 + ms).expect("in range")
    }

    fn requests() -> Vec<ControlRequest> {
        vec![
            ControlRequest {
                job: "report".to_owned(),
                action: ControlAction::Pause {
                    by: "ops on call".to_owned(),
                },
                at: at(1),
            },
            ControlRequest {
                job: "report".to_owned(),
                action: ControlAction::Trigger(ManualRun {
                    id: 0xdead_beef_0000_0001,
                    requested_at: at(2),
                }),
                at: at(2),
            },
            ControlRequest {
                job: "cleanup".to_owned(),
                action: ControlAction::Resume {
                    by: "cli".to_owned(),
                },
                at: at(3),
            },
        ]
    }

    /// Publish, read from the end taken before, read again; announce and list the roster.
    async fn round_trip(feed: &RedisFeed) {
        let (none, cursor) = feed.read(None).await.expect("reads the end").parts();
        assert!(none.is_empty(), "reading from the end replays nothing");
        for request in requests() {
            feed.publish(request).await.expect("publishes");
        }
        let (read, cursor) = feed.read(Some(cursor)).await.expect("reads").parts();
        assert_eq!(read, requests());
        let (again, same) = feed
            .read(Some(cursor.clone()))
            .await
            .expect("reads")
            .parts();
        assert!(again.is_empty(), "{again:?}");
        assert_eq!(same, cursor, "the cursor stays where nothing new came");
        let (_, end) = feed.read(None).await.expect("reads the end").parts();
        assert_eq!(end, cursor, "the end is the last request");

        let entry = |job: &str, instance: &str, ms: i64| RosterEntry {
            job: job.to_owned(),
            schedule: "cron = \"*/5 * * * *\"".to_owned(),
            instance: instance.to_owned(),
            at: at(ms),
            due_grace: Some(Duration::from_secs(61)),
        };
        feed.announce(vec![entry("report", "a", 10), entry("cleanup", "a", 10)])
            .await
            .expect("announces");
        feed.announce(vec![entry("report", "b 2", 20)])
            .await
            .expect("announces");
        feed.announce(Vec::new())
            .await
            .expect("nothing to announce");
        assert_eq!(
            feed.roster().await.expect("lists"),
            vec![entry("cleanup", "a", 10), entry("report", "b 2", 20)]
        );
    }

    #[tokio::test]
    async fn redis_feed_carries_requests_in_order_and_the_roster() {
        let Some(server) = RedisServer::start() else {
            return;
        };
        let conn = connect(&server.url()).await.expect("connects");
        round_trip(&RedisFeed::new(conn.clone(), "cronguard")).await;
        // An entry another version wrote is skipped, not an error, and the cursor moves past it.
        let feed = RedisFeed::new(conn.clone(), "cronguard");
        let (_, cursor) = feed.read(None).await.expect("reads the end").parts();
        let mut raw = conn;
        let _: String = redis::cmd("XADD")
            .arg("cronguard:controls")
            .arg("*")
            .arg("job")
            .arg("report")
            .arg("action")
            .arg("explode")
            .query_async(&mut raw)
            .await
            .expect("XADD");
        let (read, next) = feed
            .read(Some(cursor.clone()))
            .await
            .expect("reads")
            .parts();
        assert!(read.is_empty(), "{read:?}");
        assert_ne!(next, cursor);
    }

    /// The ids of the trigger requests in `read`.
    fn triggers(read: &[ControlRequest]) -> Vec<u64> {
        read.iter()
            .filter_map(|r| match r.action {
                ControlAction::Trigger(run) => Some(run.id),
                _ => None,
            })
            .collect()
    }

    /// Adds a trigger of run `id` to the stream as entry `entry` (`*`: the server's next id).
    async fn add_trigger(conn: &mut RedisConn, entry: &str, id: u64) {
        let _: String = redis::cmd("XADD")
            .arg("cronguard:controls")
            .arg(entry)
            .arg("job")
            .arg("report")
            .arg("action")
            .arg("trigger")
            .arg("argument")
            .arg(format!("{id:016x}"))
            .arg("at")
            .arg(Utc::now().timestamp_millis())
            .query_async(conn)
            .await
            .expect("XADD");
    }

    #[tokio::test]
    async fn redis_feed_reads_what_was_asked_for_after_its_stream_was_deleted() {
        let Some(server) = RedisServer::start() else {
            return;
        };
        let mut conn = connect(&server.url()).await.expect("connects");
        let feed = RedisFeed::new(conn.clone(), "cronguard");
        // The triggers read after `cursor`, the next cursor, and whether the stream was read
        // again from its start.
        let read_on = |cursor: String| {
            let feed = &feed;
            async move {
                let read = feed.read(Some(cursor)).await.expect("reads");
                (triggers(&read.requests), read.cursor, read.restarted)
            }
        };
        let cursor = feed.read(None).await.expect("reads the end").cursor;
        add_trigger(&mut conn, "*", 1).await;
        let (read, cursor, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![1], false));
        let delete = |conn: &mut RedisConn| {
            let mut conn = conn.clone();
            async move {
                let _: i64 = redis::cmd("DEL")
                    .arg("cronguard:controls")
                    .query_async(&mut conn)
                    .await
                    .expect("DEL");
            }
        };
        // Deleted (FLUSHALL, a key deleted by hand), then written again with ids below the
        // cursor: restored from another server, or by a server whose clock is behind.
        delete(&mut conn).await;
        add_trigger(&mut conn, "1-1", 2).await;
        add_trigger(&mut conn, "1-2", 3).await;
        let (read, cursor, restarted) = read_on(cursor).await;
        assert_eq!(
            (read, restarted),
            (vec![2, 3], true),
            "written below the cursor"
        );
        // Deleted and read while gone, then written again.
        delete(&mut conn).await;
        let (read, cursor, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![], true), "gone");
        add_trigger(&mut conn, "1-1", 4).await;
        let (read, cursor, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![4], false), "written again");
        // Deleted and written again by a server whose clock is right: above the cursor.
        delete(&mut conn).await;
        add_trigger(&mut conn, "*", 5).await;
        let (read, cursor, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![5], false));
        add_trigger(&mut conn, "*", 6).await;
        let (read, _, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![6], false));
    }

    #[tokio::test]
    async fn redis_feed_lists_the_processes_present() {
        let Some(server) = RedisServer::start() else {
            return;
        };
        let mut conn = connect(&server.url()).await.expect("connects");
        let feed = RedisFeed::new(conn.clone(), "cronguard");
        crate::guard::feed::two_attend(&feed).await;
        // Scored by the server's clock, whatever this host's says (a host an hour off neither
        // lingers in the list nor drops out of it).
        let (secs, micros): (i64, i64) = redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .expect("TIME");
        let score: f64 = redis::cmd("ZSCORE")
            .arg("cronguard:processes")
            .arg("a 1 0001")
            .query_async(&mut conn)
            .await
            .expect("ZSCORE");
        let server_ms = secs * 1000 + micros / 1000;
        assert!(
            (server_ms as f64 - score).abs() < 2_000.0,
            "{score} against {server_ms}"
        );
        let long_ago = Utc::now().timestamp_millis()
            - i64::try_from(PRESENCE_TTL.as_millis()).expect("small")
            - 1;
        let _: i64 = redis::cmd("ZADD")
            .arg("cronguard:processes")
            .arg(long_ago)
            .arg("b 2 0002")
            .query_async(&mut conn)
            .await
            .expect("ZADD");
        crate::guard::feed::listed_without_attending(&feed).await;
        crate::guard::feed::expect_alone(&feed).await;
    }

    #[tokio::test]
    async fn redis_feed_works_on_a_cluster() {
        let Some(cluster) = RedisCluster::start(3, 0) else {
            return;
        };
        let conn = connect(&cluster.url()).await.expect("connects");
        let feed = RedisFeed::new(conn, "cronguard");
        round_trip(&feed).await;
        crate::guard::feed::two_attend(&feed).await;
        crate::guard::feed::partition_leases(&feed).await;
    }

    #[tokio::test]
    async fn redis_feed_keeps_partition_leases() {
        let Some(server) = RedisServer::start() else {
            return;
        };
        let conn = connect(&server.url()).await.expect("connects");
        crate::guard::feed::partition_leases(&RedisFeed::new(conn, "cronguard")).await;
    }
}
