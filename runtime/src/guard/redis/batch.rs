//! Batches the Redis guards' operations: the claims, releases, renewals, abandons and drop
//! reports that the jobs of a process send at about the same instant go to the server in one
//! call of the batch script ([`scripts::BATCH`]), each answered as if it had run alone.
//!
//! Nothing waits to fill a batch: the first operation is sent as soon as a call is free, and what
//! arrives while [`IN_FLIGHT`] calls are out is sent together in the next one, up to
//! [`MAX_BATCH`] operations. So a single due job costs one round trip, as before, and a thousand
//! jobs due at the same instant cost a few.
//!
//! On a Redis Cluster every key of one call must live on one node: operations are grouped by
//! the hash slot of their keys (all keys of a job share one), and each group is its own call.
//!
//! A batcher made with [`Batcher::waiting`] sends each call together with `WAIT` (see
//! [`call_and_wait`]) and answers every operation of the call with the number of replicas that
//! acknowledged it: the renewals of `Builder::redis_wait_for_replicas` go through one, on a
//! connection of their own (docs/operations/redis.md), so that the leases of many runs share one
//! `WAIT` per call.

use std::sync::Arc;

use redis::aio::ConnectionLike;
use redis::{Cmd, RedisError, ServerErrorKind, Value};
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::connection::RedisConn;
use super::scripts::{self, op};
use super::{cluster, ReplicaWait};
use crate::guard::batching::Queue;

/// The most operations in one call.
pub(crate) const MAX_BATCH: usize = 1000;

/// Calls out at once: while they are, new operations gather for the next call.
const IN_FLIGHT: usize = 2;

/// One operation: its code (see [`scripts::op`]), its keys and its arguments.
pub(super) struct Op {
    pub(super) code: &'static str,
    pub(super) keys: Vec<Arg>,
    pub(super) args: Vec<Arg>,
}

/// A key or an argument of an operation, written straight into the call's buffer: a claim
/// formats nothing of its own, so that a burst of claims costs no string per argument.
#[derive(Clone, Debug)]
pub(super) enum Arg {
    /// A string the guard keeps (a key, its nonce).
    Shared(Arc<str>),
    Static(&'static str),
    Int(i64),
    /// A string the guard keeps followed by a number: a fire's report key, a claimant's token.
    Joined(Arc<str>, i64),
    /// Anything else.
    Owned(String),
}

impl Arg {
    /// The string a key's hash slot is computed from: a joined key shares the hash tag of its
    /// first part.
    fn slot_str(&self) -> &str {
        match self {
            Arg::Shared(s) | Arg::Joined(s, _) => s,
            Arg::Static(s) => s,
            Arg::Owned(s) => s,
            Arg::Int(_) => "",
        }
    }
}

impl redis::ToRedisArgs for Arg {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        use std::io::Write as _;
        match self {
            Arg::Shared(s) => out.write_arg(s.as_bytes()),
            Arg::Static(s) => out.write_arg(s.as_bytes()),
            Arg::Owned(s) => out.write_arg(s.as_bytes()),
            // Writing into the command's own buffer cannot fail.
            Arg::Int(n) => {
                let _ = write!(out.writer_for_next_arg(), "{n}");
            }
            Arg::Joined(s, n) => {
                let _ = write!(out.writer_for_next_arg(), "{s}{n}");
            }
        }
    }
}

impl Op {
    /// The `EVALSHA` of the batch script for these operations alone (or, through [`call`], for
    /// a batch of them): every key first, then every operation's code and arguments.
    pub(super) fn script_call<'a>(ops: impl Iterator<Item = &'a Op> + Clone) -> redis::Cmd {
        let keys: usize = ops.clone().map(|op| op.keys.len()).sum();
        let args: usize = ops.clone().map(|op| 1 + op.args.len()).sum();
        // Sized up front: a call of a thousand operations would otherwise grow its buffer a dozen
        // times, copying it each time.
        let mut cmd = redis::Cmd::with_capacity(3 + keys + args, 48 * keys + 16 * args);
        cmd.arg("EVALSHA").arg(scripts::BATCH.get_hash()).arg(keys);
        for op in ops.clone() {
            for key in &op.keys {
                cmd.arg(key);
            }
        }
        for op in ops {
            cmd.arg(op.code);
            for arg in &op.args {
                cmd.arg(arg);
            }
        }
        cmd
    }
}

/// An operation's answer, and how many replicas acknowledged its call (a waiting batcher's).
type Answer = (Value, Option<u64>);

struct Queued {
    op: Op,
    reply: oneshot::Sender<Result<Answer, RedisError>>,
}

/// Sends the operations of every guard on one connection in batches.
pub(crate) struct Batcher {
    tx: mpsc::UnboundedSender<Queued>,
}

impl Batcher {
    /// Starts the task that sends the batches of `conn`; it ends when the last guard using this
    /// batcher is dropped. Must be called inside a tokio runtime.
    pub(crate) fn new(conn: RedisConn) -> Arc<Batcher> {
        Self::start(conn, None)
    }

    /// [`new`](Self::new), every call followed by `WAIT` for `wait` in the same round trip;
    /// `conn` must carry nothing else, since `WAIT` blocks it until the replicas answer.
    pub(crate) fn waiting(conn: RedisConn, wait: ReplicaWait) -> Arc<Batcher> {
        Self::start(conn, Some(wait))
    }

    fn start(conn: RedisConn, wait: Option<ReplicaWait>) -> Arc<Batcher> {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(send_batches(conn, wait, rx));
        Arc::new(Batcher { tx })
    }

    /// Carries out `op` in the next batch; its answer, or the error of its batch's call.
    pub(super) async fn call(&self, op: Op) -> Result<Value, RedisError> {
        Ok(self.call_acknowledged(op).await?.0)
    }

    /// [`call`](Self::call), with the number of replicas that acknowledged the call that carried
    /// `op` (`None` from a batcher that does not wait).
    pub(super) async fn call_acknowledged(&self, op: Op) -> Result<Answer, RedisError> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(Queued { op, reply }).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

fn stopped() -> RedisError {
    RedisError::from((
        redis::ErrorKind::Io,
        "the batch task of the Redis guard has stopped",
    ))
}

async fn send_batches(
    conn: RedisConn,
    wait: Option<ReplicaWait>,
    mut rx: mpsc::UnboundedReceiver<Queued>,
) {
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut queue = Queue::new(
        |q: &Queued| matches!(q.op.code, op::CLAIM | op::MANUAL | op::RENEW),
        |q: &Queued| q.op.keys.first().map_or("", Arg::slot_str),
    );
    while queue.wait(&mut rx).await {
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            return;
        };
        let batch = queue.take(&mut rx, MAX_BATCH).await;
        let conn = conn.clone();
        tokio::spawn(async move {
            let groups = conn.group_by_node(batch, |q| q.op.keys.first().map_or("", Arg::slot_str));
            futures_util::future::join_all(groups.into_iter().map(|g| call(conn.clone(), wait, g)))
                .await;
            drop(permit);
        });
    }
}

/// One call of the batch script for `batch` (followed by `WAIT` when `wait` is set); every
/// operation gets its answer or the call's error.
async fn call(mut conn: RedisConn, wait: Option<ReplicaWait>, batch: Vec<Queued>) {
    let cmd = Op::script_call(batch.iter().map(|q| &q.op));
    let answers: Result<(Vec<Value>, Option<u64>), RedisError> = match wait {
        None => run_script(&mut conn, &cmd).await.map(|a| (a, None)),
        Some(wait) => {
            let key = batch
                .first()
                .and_then(|q| q.op.keys.first())
                .map_or("", Arg::slot_str);
            match call_and_wait(&mut conn, cmd, key, wait).await {
                Ok((answers, acked)) => redis::from_redis_value(answers)
                    .map(|a| (a, Some(acked)))
                    .map_err(RedisError::from),
                Err(e) => Err(e),
            }
        }
    };
    match answers {
        Ok((answers, acked)) if answers.len() == batch.len() => {
            for (queued, answer) in batch.into_iter().zip(answers) {
                let _ = queued.reply.send(Ok((answer, acked)));
            }
        }
        Ok((answers, _)) => {
            let e = RedisError::from((
                redis::ErrorKind::Parse,
                "the batch script answered a different number of operations",
                format!("{} answers to {} operations", answers.len(), batch.len()),
            ));
            for queued in batch {
                let _ = queued.reply.send(Err(e.clone()));
            }
        }
        Err(e) => {
            for queued in batch {
                let _ = queued.reply.send(Err(e.clone()));
            }
        }
    }
}

/// Runs `cmd`, an `EVALSHA` of the batch script; a server that does not know the script (it
/// restarted) gets it loaded, and `cmd` once more.
pub(super) async fn run_script(
    conn: &mut RedisConn,
    cmd: &redis::Cmd,
) -> Result<Vec<Value>, RedisError> {
    match cmd.query_async(conn).await {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            scripts::BATCH.load_async(conn).await?;
            cmd.query_async(conn).await
        }
        answered => answered,
    }
}

/// Sends `evalsha`, a call of the batch script, and `WAIT` in one pipeline to the primary of
/// `key`, and answers the script's reply and the number of replicas that acknowledged. `WAIT`
/// counts the writes of the connection it is sent on, so it must follow them on the same one. On
/// a cluster, `WAIT` alone would go to every primary, so the pipeline is routed by `key`; the
/// cluster client follows `MOVED` and `ASK` inside a pipeline too. A pipeline's errors come back
/// as values: `NOSCRIPT` loads the script and sends the pipeline once more.
pub(super) async fn call_and_wait(
    conn: &mut RedisConn,
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
                "the script call and its WAIT did not both answer",
            )));
        };
        match reply {
            Value::ServerError(e) => {
                let e = RedisError::from(e);
                if loaded || e.kind() != redis::ErrorKind::Server(ServerErrorKind::NoScript) {
                    return Err(e);
                }
                scripts::BATCH.load_async(conn).await?;
                loaded = true;
            }
            reply => return Ok((reply, redis::from_redis_value(acked)?)),
        }
    }
}
