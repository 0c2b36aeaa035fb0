//! The control feed, the roster and the processes present in PostgreSQL (see [`ControlFeed`]):
//! the tables `<schema>.controls`, one row per request in the order of its `id`,
//! `<schema>.roster`, one row per job, and `<schema>.processes`, one row per process present.
//! Requests older than seven days are deleted by the statement that publishes one, through the
//! index on `at`.
//!
//! A cursor is `<table oid>:<file node>:<id>`: the `id` of the last request read, and which
//! table it was read from. The ids restart below it when the table is truncated with
//! `RESTART IDENTITY`, dropped and made again (the guard makes a lost schema again), or restored
//! from a backup, so the statement that reads compares the table's oid and file node
//! (`pg_relation_filenode`, which `TRUNCATE` and a restore change) and its greatest id (a
//! sequence set back) with the cursor's, and reads from the table's start when they differ
//! ([`FeedRead::restarted`]). It costs two catalogue lookups and the last entry of the primary
//! key, in the same statement. `VACUUM FULL` and `CLUSTER` change the file node too: the feed
//! is then read again from its start, which only repeats requests (docs/guide/controls.md).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::types::Type;
use tokio_postgres::Row;

use super::{first, pg_err, Database};
use crate::guard::feed::{
    ControlAction, ControlFeed, ControlRequest, FeedRead, RosterEntry, FEED_BATCH, PRESENCE_TTL,
};
use crate::guard::partitions::{Ownership, PartitionLease, MEMBER_TTL, PARTITIONS};
use crate::guard::GuardError;
use crate::registry::BoxFuture;

/// The control feed and roster of the `postgres` guards of one schema.
pub(crate) struct PostgresFeed {
    db: Arc<Database>,
    publish: Arc<str>,
    end: Arc<str>,
    read: Arc<str>,
    announce: Arc<str>,
    roster: Arc<str>,
    attend: Arc<str>,
    own: Arc<str>,
    leave: Arc<str>,
}

impl PostgresFeed {
    pub(crate) fn new(db: Arc<Database>) -> Self {
        let s = db.schema.clone();
        PostgresFeed {
            db,
            // Publishes take turns (a transaction lock), so that ids commit in their order and
            // a reader past id N never misses a request given id N - 1 a moment later.
            publish: Arc::from(format!(
                "WITH turn AS (SELECT pg_advisory_xact_lock(hashtext('{s}.controls'))), \
                 pruned AS (DELETE FROM {s}.controls \
                   WHERE at < clock_timestamp() - interval '7 days') \
                 INSERT INTO {s}.controls (job, action, argument, at) \
                 SELECT $1, $2, $3, $4 FROM turn"
            )),
            end: Arc::from(format!(
                "SELECT '{s}.controls'::regclass::oid::bigint, \
                   pg_relation_filenode('{s}.controls')::bigint, coalesce(max(id), 0) \
                 FROM {s}.controls"
            )),
            // Always one row at least: the table's identity and where this read starts, with
            // the requests after it, if any.
            read: Arc::from(format!(
                "WITH head AS (SELECT '{s}.controls'::regclass::oid::bigint AS rel, \
                   pg_relation_filenode('{s}.controls')::bigint AS node, \
                   (SELECT coalesce(max(id), 0) FROM {s}.controls) AS top), \
                 start AS (SELECT rel, node, \
                   NOT (rel = $1 AND node = $2 AND top >= $3) AS restarted FROM head) \
                 SELECT start.rel, start.node, start.restarted, c.id, c.job, c.action, \
                   c.argument, c.at \
                 FROM start LEFT JOIN LATERAL (SELECT id, job, action, argument, at \
                   FROM {s}.controls \
                   WHERE id > CASE WHEN start.restarted THEN 0 ELSE $3 END \
                   ORDER BY id LIMIT $4) c ON true \
                 ORDER BY c.id"
            )),
            announce: Arc::from(format!(
                "INSERT INTO {s}.roster (job, schedule, instance, at, due_grace_ms) \
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], \
                   $5::bigint[]) \
                 ON CONFLICT (job) DO UPDATE SET schedule = EXCLUDED.schedule, \
                 instance = EXCLUDED.instance, at = EXCLUDED.at, \
                 due_grace_ms = EXCLUDED.due_grace_ms"
            )),
            roster: Arc::from(format!(
                "SELECT job, schedule, instance, at, due_grace_ms FROM {s}.roster ORDER BY job"
            )),
            // One statement sees the table as it was before it: the attending process is added
            // to what it reads.
            attend: Arc::from(format!(
                "WITH seen AS (INSERT INTO {s}.processes (process, seen) \
                   VALUES ($1, clock_timestamp()) \
                   ON CONFLICT (process) DO UPDATE SET seen = EXCLUDED.seen), \
                 gone AS (DELETE FROM {s}.processes \
                   WHERE seen < clock_timestamp() - $2 * interval '1 millisecond') \
                 SELECT process FROM {s}.processes \
                   WHERE seen >= clock_timestamp() - $2 * interval '1 millisecond' \
                 UNION SELECT $1"
            )),
            // One statement, on the statement's own clock: the partitions taken or renewed, those
            // given up, the others as they were (a statement does not see its own writes), and the
            // group's members. A lease is never taken to last longer than `$4` from now (after a
            // step back of the database's clock).
            own: Arc::from(format!(
                "WITH seen AS (INSERT INTO {s}.partition_members (grp, process, seen) \
                   VALUES ($1, $2, statement_timestamp()) \
                   ON CONFLICT (grp, process) DO UPDATE SET seen = EXCLUDED.seen), \
                 gone AS (DELETE FROM {s}.partition_members \
                   WHERE grp = $1 AND process <> $2 \
                   AND seen < statement_timestamp() - $3 * interval '1 millisecond'), \
                 took AS (INSERT INTO {s}.partitions AS p (grp, part, owner, epoch, expires, alive_ms) \
                   SELECT $1, w, $2, (extract(epoch FROM statement_timestamp()) * 1000000)::bigint, \
                     statement_timestamp() + $4 * interval '1 millisecond', $6 \
                   FROM unnest($5::integer[]) AS w \
                   ON CONFLICT (grp, part) DO UPDATE SET \
                     epoch = CASE WHEN p.owner = EXCLUDED.owner AND least(p.expires, \
                         statement_timestamp() + $4 * interval '1 millisecond') > statement_timestamp() \
                       THEN p.epoch ELSE greatest(p.epoch + 1, EXCLUDED.epoch) END, \
                     owner = EXCLUDED.owner, expires = EXCLUDED.expires, alive_ms = EXCLUDED.alive_ms \
                   WHERE least(p.expires, statement_timestamp() + $4 * interval '1 millisecond') \
                       <= statement_timestamp() \
                     OR p.owner = EXCLUDED.owner \
                   RETURNING part, owner, epoch, expires, alive_ms), \
                 released AS (UPDATE {s}.partitions SET expires = statement_timestamp() \
                   WHERE grp = $1 AND owner = $2 AND expires > statement_timestamp() \
                   AND NOT (part = ANY ($5::integer[])) \
                   RETURNING part, owner, epoch, expires, alive_ms), \
                 changed AS (SELECT * FROM took UNION ALL SELECT * FROM released), \
                 leases AS (SELECT * FROM changed UNION ALL \
                   SELECT part, owner, epoch, expires, alive_ms FROM {s}.partitions \
                   WHERE grp = $1 AND part NOT IN (SELECT part FROM changed)) \
                 SELECT part, owner, epoch, greatest(0, least($4, \
                   (extract(epoch FROM expires - statement_timestamp()) * 1000)::bigint)), alive_ms \
                 FROM leases \
                 UNION ALL SELECT -1, process, 0, 0, 0 FROM {s}.partition_members \
                   WHERE grp = $1 AND process <> $2 \
                   AND seen >= statement_timestamp() - $3 * interval '1 millisecond' \
                 UNION ALL SELECT -1, $2, 0, 0, 0 \
                 UNION ALL SELECT -2, '', 0, \
                   (extract(epoch FROM statement_timestamp()) * 1000)::bigint, 0"
            )),
            // A planned stop: no member from now on, its live leases ended now (epoch and owner
            // kept, as `own` gives a partition up).
            leave: Arc::from(format!(
                "WITH gone AS (DELETE FROM {s}.partition_members WHERE grp = $1 AND process = $2), \
                 released AS (UPDATE {s}.partitions SET expires = statement_timestamp() \
                   WHERE grp = $1 AND owner = $2 AND expires > statement_timestamp() RETURNING part) \
                 SELECT count(*)::bigint FROM released"
            )),
        }
    }
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, i: usize) -> Result<T, GuardError> {
    row.try_get(i).map_err(|e| pg_err(&e))
}

/// A cursor: the table's oid and file node, and the id of the last request read.
fn cursor(rel: i64, node: i64, id: i64) -> String {
    format!("{rel}:{node}:{id}")
}

/// Reads what [`cursor`] wrote.
fn parse_cursor(cursor: &str) -> Result<(i64, i64, i64), GuardError> {
    let mut parts = cursor.splitn(3, ':').map(str::parse::<i64>);
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Ok(rel)), Some(Ok(node)), Some(Ok(id))) => Ok((rel, node, id)),
        _ => Err(GuardError::invalid(format!(
            "the control feed's cursor `{cursor}` is not `<table oid>:<file node>:<row id>` of `controls`; read from the feed's end (no cursor) instead"
        ))),
    }
}

impl ControlFeed for PostgresFeed {
    fn publish(&self, request: ControlRequest) -> BoxFuture<Result<(), GuardError>> {
        let db = Arc::clone(&self.db);
        let sql = Arc::clone(&self.publish);
        Box::pin(async move {
            let (word, argument) = (request.action.word(), request.action.argument());
            db.query(
                &sql,
                &[
                    (&request.job, Type::TEXT),
                    (&word, Type::TEXT),
                    (&argument, Type::TEXT),
                    (&request.at, Type::TIMESTAMPTZ),
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn read(&self, cursor: Option<String>) -> BoxFuture<Result<FeedRead, GuardError>> {
        let db = Arc::clone(&self.db);
        let (end, read) = (Arc::clone(&self.end), Arc::clone(&self.read));
        Box::pin(async move {
            let Some(cursor) = cursor else {
                let rows = db.query(&end, &[]).await?;
                let row = first(&rows)?;
                let (rel, node, last): (i64, i64, i64) = (get(row, 0)?, get(row, 1)?, get(row, 2)?);
                return Ok(FeedRead::on(Vec::new(), self::cursor(rel, node, last)));
            };
            let (rel, node, after) = parse_cursor(&cursor)?;
            let limit = FEED_BATCH as i64;
            let rows = db
                .query(
                    &read,
                    &[
                        (&rel, Type::INT8),
                        (&node, Type::INT8),
                        (&after, Type::INT8),
                        (&limit, Type::INT8),
                    ],
                )
                .await?;
            let head = first(&rows)?;
            let (rel, node, restarted): (i64, i64, bool) =
                (get(head, 0)?, get(head, 1)?, get(head, 2)?);
            let mut last = if restarted { 0 } else { after };
            let mut requests = Vec::with_capacity(rows.len());
            for row in &rows {
                let Some(id) = get::<Option<i64>>(row, 3)? else {
                    continue; // the table holds nothing after the start
                };
                last = id;
                let (job, word, argument): (String, String, String) =
                    (get(row, 4)?, get(row, 5)?, get(row, 6)?);
                let at: DateTime<Utc> = get(row, 7)?;
                match ControlAction::parse(&word, &argument, at) {
                    Some(action) => requests.push(ControlRequest { job, action, at }),
                    None => tracing::warn!(
                        id = last,
                        action = %word,
                        "skipped a control request that this version of cronguard cannot read"
                    ),
                }
            }
            Ok(FeedRead {
                requests,
                cursor: self::cursor(rel, node, last),
                restarted,
            })
        })
    }

    fn announce(&self, jobs: Vec<RosterEntry>) -> BoxFuture<Result<(), GuardError>> {
        let db = Arc::clone(&self.db);
        let sql = Arc::clone(&self.announce);
        Box::pin(async move {
            // One row per job: the upsert cannot change a row twice in one statement.
            let mut latest: std::collections::BTreeMap<&str, &RosterEntry> = Default::default();
            for entry in &jobs {
                latest.insert(&entry.job, entry);
            }
            if latest.is_empty() {
                return Ok(());
            }
            let names: Vec<&str> = latest.keys().copied().collect();
            let schedules: Vec<&str> = latest.values().map(|e| e.schedule.as_str()).collect();
            let instances: Vec<&str> = latest.values().map(|e| e.instance.as_str()).collect();
            let ats: Vec<DateTime<Utc>> = latest.values().map(|e| e.at).collect();
            let graces: Vec<Option<i64>> = latest
                .values()
                .map(|e| {
                    e.due_grace
                        .map(|g| i64::try_from(g.as_millis()).unwrap_or(i64::MAX))
                })
                .collect();
            db.query(
                &sql,
                &[
                    (&names, Type::TEXT_ARRAY),
                    (&schedules, Type::TEXT_ARRAY),
                    (&instances, Type::TEXT_ARRAY),
                    (&ats, Type::TIMESTAMPTZ_ARRAY),
                    (&graces, Type::INT8_ARRAY),
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn roster(&self) -> BoxFuture<Result<Vec<RosterEntry>, GuardError>> {
        let db = Arc::clone(&self.db);
        let sql = Arc::clone(&self.roster);
        Box::pin(async move {
            let rows = db.query(&sql, &[]).await?;
            rows.iter()
                .map(|row| {
                    let grace: Option<i64> = get(row, 4)?;
                    Ok(RosterEntry {
                        job: get(row, 0)?,
                        schedule: get(row, 1)?,
                        instance: get(row, 2)?,
                        at: get(row, 3)?,
                        due_grace: grace
                            .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
                    })
                })
                .collect()
        })
    }

    fn attend(&self, process: &str) -> BoxFuture<Result<Vec<String>, GuardError>> {
        let db = Arc::clone(&self.db);
        let sql = Arc::clone(&self.attend);
        let process = process.to_owned();
        let ttl = i64::try_from(PRESENCE_TTL.as_millis()).unwrap_or(i64::MAX);
        Box::pin(async move {
            let rows = db
                .query(&sql, &[(&process, Type::TEXT), (&ttl, Type::INT8)])
                .await?;
            rows.iter().map(|row| get(row, 0)).collect()
        })
    }

    fn leave(
        &self,
        group: &str,
        process: &str,
        _lease: Duration,
    ) -> BoxFuture<Result<(), GuardError>> {
        let db = Arc::clone(&self.db);
        let sql = Arc::clone(&self.leave);
        let (group, process) = (group.to_owned(), process.to_owned());
        Box::pin(async move {
            db.query(&sql, &[(&group, Type::TEXT), (&process, Type::TEXT)])
                .await?;
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
        let db = Arc::clone(&self.db);
        let sql = Arc::clone(&self.own);
        let (group, process) = (group.to_owned(), process.to_owned());
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let (ttl, lease) = (ms(MEMBER_TTL), ms(lease));
        let wanted: Vec<i32> = wanted.iter().map(|p| i32::from(*p)).collect();
        let alive = Utc::now().timestamp_millis();
        Box::pin(async move {
            let rows = db
                .query(
                    &sql,
                    &[
                        (&group, Type::TEXT),
                        (&process, Type::TEXT),
                        (&ttl, Type::INT8),
                        (&lease, Type::INT8),
                        (&wanted, Type::INT4_ARRAY),
                        (&alive, Type::INT8),
                    ],
                )
                .await?;
            let mut read = Ownership::default();
            for row in &rows {
                let part: i32 = get(row, 0)?;
                let name: String = get(row, 1)?;
                if part == -2 {
                    read.server_time = DateTime::<Utc>::from_timestamp_millis(get(row, 3)?);
                    continue;
                }
                if part < 0 {
                    read.members.push(name);
                    continue;
                }
                let (epoch, left): (i64, i64) = (get(row, 2)?, get(row, 3)?);
                let partition = u16::try_from(part)
                    .ok()
                    .filter(|p| *p < PARTITIONS)
                    .ok_or_else(|| {
                        GuardError::invalid(format!(
                            "the table `partitions` holds a partition {part} that this version does not know; run one version of cronguard against one schema"
                        ))
                    })?;
                read.leases.push(PartitionLease {
                    partition,
                    owner: name,
                    epoch: u64::try_from(epoch).unwrap_or(0),
                    left: Duration::from_millis(u64::try_from(left).unwrap_or(0)),
                    alive: DateTime::<Utc>::from_timestamp_millis(get(row, 4)?),
                });
            }
            read.members.dedup();
            Ok(Some(read))
        })
    }

    fn processes(&self) -> BoxFuture<Result<Vec<crate::guard::feed::SeenProcess>, GuardError>> {
        let db = Arc::clone(&self.db);
        Box::pin(async move {
            let sql = format!(
                "SELECT process, \
                   greatest(0, (extract(epoch FROM clock_timestamp() - seen) * 1000)::bigint) \
                 FROM {}.processes",
                db.schema
            );
            let rows = db.query(&sql, &[]).await?;
            rows.iter()
                .map(|row| {
                    let ms: i64 = get(row, 1)?;
                    Ok(crate::guard::feed::SeenProcess {
                        id: get(row, 0)?,
                        ago: Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
                    })
                })
                .collect()
        })
    }
}
