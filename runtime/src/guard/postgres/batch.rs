//! Batches the `postgres` guards' claims, renewals, releases and fate-point reads: what the jobs
//! of a process send at about the same instant goes to the database as one statement per kind,
//! each operation a call of the same function a single operation calls (`claim_v5`, `renew_v1`,
//! `release_v1`, `fate_point_v1`), so each is answered as if it had run alone. Fate points are
//! read by every job when a process starts, so a start with 10,000 jobs is a few statements,
//! not 10,000.
//!
//! Nothing waits to fill a batch: the first operation goes out as soon as a statement slot is
//! free, and what arrives meanwhile goes together in the next statement, up to [`MAX_BATCH`]. A
//! statement's operations are sorted by job, so that statements of several replicas lock the
//! jobs' rows in one order and never deadlock.

use std::sync::{Arc, Weak};

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;

use super::{pg_err, Database, Failed, CLAIM_AHEAD_TOLERANCE_MS};
use crate::guard::batching::Queue;
use crate::guard::{GuardError, GuardErrorKind};

/// The most operations in one statement.
const MAX_BATCH: usize = 1000;

/// Batches out at once (each up to three statements, one per kind, on connections of the pool).
const IN_FLIGHT: usize = 2;

/// A claim's parameters (see `claim_v5` in the schema).
pub(super) struct ClaimOp {
    pub(super) job: Arc<str>,
    pub(super) fire: DateTime<Utc>,
    pub(super) token: String,
    pub(super) lease_ms: i64,
    pub(super) replace: bool,
    pub(super) skip: bool,
    pub(super) nonce: Arc<str>,
    pub(super) instance: Arc<str>,
    pub(super) history: bool,
}

/// One operation.
pub(super) enum Op {
    Claim(ClaimOp),
    Renew {
        job: Arc<str>,
        token: String,
        lease_ms: i64,
    },
    Release {
        job: Arc<str>,
        token: String,
    },
    FatePoint {
        job: Arc<str>,
    },
}

impl Op {
    fn job(&self) -> &str {
        match self {
            Op::Claim(c) => &c.job,
            Op::Renew { job, .. } | Op::Release { job, .. } | Op::FatePoint { job } => job,
        }
    }
}

/// One operation's answer.
pub(super) enum Reply {
    /// `(answer, value, ignored)` of `claim_v5`, and its pause (with answer `6`).
    Claim(i32, i64, bool, Option<(DateTime<Utc>, String)>),
    /// `0` lost, `1` renewed, `2` renewed and asked to stop.
    Renew(i32),
    /// Whether the lease was this holder's.
    Release(bool),
    /// The job's fate point.
    FatePoint(Option<DateTime<Utc>>),
}

struct Queued {
    op: Op,
    reply: oneshot::Sender<Result<Reply, GuardError>>,
}

/// The sending half of a database's batch task.
pub(super) struct Batches(mpsc::UnboundedSender<Queued>);

impl Batches {
    /// Starts the batch task of `db`; it ends when `db` is dropped (its `Batches` with it).
    pub(super) fn start(db: Weak<Database>) -> Batches {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(send_batches(db, rx));
        Batches(tx)
    }
}

impl Database {
    /// Carries out `op` in the next batch.
    pub(super) async fn batched(self: &Arc<Self>, op: Op) -> Result<Reply, GuardError> {
        let (reply, answer) = oneshot::channel();
        let batches = self
            .batches
            .get_or_init(|| Batches::start(Arc::downgrade(self)));
        batches
            .0
            .send(Queued { op, reply })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

fn stopped() -> GuardError {
    GuardError::new(
        GuardErrorKind::Other,
        "the batch task of the postgres guard has stopped",
    )
}

async fn send_batches(db: Weak<Database>, mut rx: mpsc::UnboundedReceiver<Queued>) {
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut queue = Queue::new(
        |q: &Queued| matches!(q.op, Op::Claim(_) | Op::Renew { .. }),
        |q: &Queued| q.op.job(),
    );
    while queue.wait(&mut rx).await {
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            return;
        };
        // A statement costs far more than a wait for the scheduler: let the operations started in
        // the same instant (each job's claim runs on a task of its own) queue up behind the first.
        tokio::task::yield_now().await;
        let batch = queue.take(&mut rx, MAX_BATCH).await;
        let Some(db) = db.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            let (mut claims, mut renewals, mut releases, mut points) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for queued in batch {
                match queued.op {
                    Op::Claim(_) => claims.push(queued),
                    Op::Renew { .. } => renewals.push(queued),
                    Op::Release { .. } => releases.push(queued),
                    Op::FatePoint { .. } => points.push(queued),
                }
            }
            // A release of a job claimed in the same batch goes first: the claim of the job's
            // next fire would otherwise find it busy with this process's own run.
            let claimed: std::collections::HashSet<&str> =
                claims.iter().map(|q: &Queued| q.op.job()).collect();
            let (before, after): (Vec<Queued>, Vec<Queued>) = releases
                .into_iter()
                .partition(|q| claimed.contains(q.op.job()));
            drop(claimed);
            run(&db, before, Kind::Release).await;
            tokio::join!(
                run(&db, claims, Kind::Claim),
                run(&db, renewals, Kind::Renew),
                run(&db, after, Kind::Release),
                run(&db, points, Kind::FatePoint),
            );
            drop(permit);
        });
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Claim,
    Renew,
    Release,
    FatePoint,
}

/// One statement for `batch` (all of `kind`); every operation gets its answer or the error. When
/// the statement waited too long for a job's row locked elsewhere, each operation is sent again
/// alone, so that only the locked job's fails.
async fn run(db: &Database, mut batch: Vec<Queued>, kind: Kind) {
    if batch.is_empty() {
        return;
    }
    batch.sort_by(|a, b| a.op.job().cmp(b.op.job()));
    match statement(db, &batch, kind).await {
        Err(failed) if failed.locked && batch.len() > 1 => {
            tracing::warn!(
                operations = batch.len(),
                error = %crate::error::Chain(&failed.error),
                "a job's row in PostgreSQL is locked by another session (an open transaction?); the batch is sent again one operation at a time"
            );
            let alone = batch.into_iter().map(|queued| async move {
                let one = [queued];
                let result = statement(db, &one, kind).await;
                answer(one.into(), result.map_err(|failed| failed.error));
            });
            futures_util::future::join_all(alone).await;
        }
        result => answer(batch, result.map_err(|failed| failed.error)),
    }
}

async fn statement(db: &Database, batch: &[Queued], kind: Kind) -> Result<Vec<Reply>, Failed> {
    match kind {
        Kind::Claim => claims(db, batch).await,
        Kind::Renew => renewals(db, batch).await,
        Kind::Release => releases(db, batch).await,
        Kind::FatePoint => fate_points(db, batch).await,
    }
}

/// Hands each operation of `batch` its reply, or the statement's error.
fn answer(batch: Vec<Queued>, result: Result<Vec<Reply>, GuardError>) {
    match result {
        Ok(replies) if replies.len() == batch.len() => {
            for (queued, reply) in batch.into_iter().zip(replies) {
                let _ = queued.reply.send(Ok(reply));
            }
        }
        Ok(replies) => {
            let text = format!(
                "the batch statement answered {} rows for {} operations",
                replies.len(),
                batch.len()
            );
            for queued in batch {
                let _ = queued
                    .reply
                    .send(Err(super::failure(GuardErrorKind::Invalid, text.clone())));
            }
        }
        Err(e) => {
            // Every operation of the batch failed with it: each gets its kind and its text.
            let text = crate::error::Chain(&e).to_string();
            for queued in batch {
                let _ = queued
                    .reply
                    .send(Err(GuardError::new(e.kind(), text.clone())));
            }
        }
    }
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, i: usize) -> Result<T, GuardError> {
    row.try_get(i).map_err(|e| pg_err(&e))
}

async fn claims(db: &Database, batch: &[Queued]) -> Result<Vec<Reply>, Failed> {
    let ops: Vec<&ClaimOp> = batch
        .iter()
        .filter_map(|q| match &q.op {
            Op::Claim(c) => Some(c),
            _ => None,
        })
        .collect();
    let jobs: Vec<&str> = ops.iter().map(|c| &*c.job).collect();
    let fires: Vec<DateTime<Utc>> = ops.iter().map(|c| c.fire).collect();
    let tokens: Vec<&str> = ops.iter().map(|c| &*c.token).collect();
    let leases: Vec<i64> = ops.iter().map(|c| c.lease_ms).collect();
    let replace: Vec<bool> = ops.iter().map(|c| c.replace).collect();
    let skip: Vec<bool> = ops.iter().map(|c| c.skip).collect();
    let nonces: Vec<&str> = ops.iter().map(|c| &*c.nonce).collect();
    let instances: Vec<&str> = ops.iter().map(|c| &*c.instance).collect();
    let history: Vec<bool> = ops.iter().map(|c| c.history).collect();
    let params: [(&(dyn ToSql + Sync), Type); 10] = [
        (&jobs, Type::TEXT_ARRAY),
        (&fires, Type::TIMESTAMPTZ_ARRAY),
        (&tokens, Type::TEXT_ARRAY),
        (&leases, Type::INT8_ARRAY),
        (&replace, Type::BOOL_ARRAY),
        (&skip, Type::BOOL_ARRAY),
        (&nonces, Type::TEXT_ARRAY),
        (&instances, Type::TEXT_ARRAY),
        (&history, Type::BOOL_ARRAY),
        (&CLAIM_AHEAD_TOLERANCE_MS, Type::INT8),
    ];
    let rows = db.query_or_locked(&db.sql.claim_batch, &params).await?;
    rows.iter()
        .map(|row| {
            let at: Option<DateTime<Utc>> = get(row, 3)?;
            let by: Option<String> = get(row, 4)?;
            Ok(Reply::Claim(
                get(row, 0)?,
                get(row, 1)?,
                get(row, 2)?,
                at.map(|at| (at, by.unwrap_or_default())),
            ))
        })
        .collect::<Result<_, GuardError>>()
        .map_err(Failed::from)
}

async fn renewals(db: &Database, batch: &[Queued]) -> Result<Vec<Reply>, Failed> {
    let mut jobs = Vec::with_capacity(batch.len());
    let mut tokens = Vec::with_capacity(batch.len());
    let mut leases = Vec::with_capacity(batch.len());
    for queued in batch {
        if let Op::Renew {
            job,
            token,
            lease_ms,
        } = &queued.op
        {
            jobs.push(&**job);
            tokens.push(token.as_str());
            leases.push(*lease_ms);
        }
    }
    let rows = db
        .query_or_locked(
            &db.sql.renew_batch,
            &[
                (&jobs, Type::TEXT_ARRAY),
                (&tokens, Type::TEXT_ARRAY),
                (&leases, Type::INT8_ARRAY),
            ],
        )
        .await?;
    rows.iter()
        .map(|row| Ok(Reply::Renew(get(row, 0)?)))
        .collect::<Result<_, GuardError>>()
        .map_err(Failed::from)
}

async fn releases(db: &Database, batch: &[Queued]) -> Result<Vec<Reply>, Failed> {
    let mut jobs = Vec::with_capacity(batch.len());
    let mut tokens = Vec::with_capacity(batch.len());
    for queued in batch {
        if let Op::Release { job, token } = &queued.op {
            jobs.push(&**job);
            tokens.push(token.as_str());
        }
    }
    let rows = db
        .query_or_locked(
            &db.sql.release_batch,
            &[(&jobs, Type::TEXT_ARRAY), (&tokens, Type::TEXT_ARRAY)],
        )
        .await?;
    rows.iter()
        .map(|row| Ok(Reply::Release(get(row, 0)?)))
        .collect::<Result<_, GuardError>>()
        .map_err(Failed::from)
}

async fn fate_points(db: &Database, batch: &[Queued]) -> Result<Vec<Reply>, Failed> {
    let jobs: Vec<&str> = batch
        .iter()
        .filter_map(|queued| match &queued.op {
            Op::FatePoint { job } => Some(&**job),
            _ => None,
        })
        .collect();
    let rows = db
        .query_or_locked(
            &db.sql.fate_point_batch,
            &[
                (&jobs, Type::TEXT_ARRAY),
                (&CLAIM_AHEAD_TOLERANCE_MS, Type::INT8),
            ],
        )
        .await?;
    rows.iter()
        .map(|row| Ok(Reply::FatePoint(get(row, 0)?)))
        .collect::<Result<_, GuardError>>()
        .map_err(Failed::from)
}
