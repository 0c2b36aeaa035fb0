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

use std::sync::Arc;

use redis::{RedisError, Value};
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::connection::RedisConn;
use super::scripts::{self, op};
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

struct Queued {
    op: Op,
    reply: oneshot::Sender<Result<Value, RedisError>>,
}

/// Sends the operations of every guard on one connection in batches.
pub(crate) struct Batcher {
    tx: mpsc::UnboundedSender<Queued>,
}

impl Batcher {
    /// Starts the task that sends the batches of `conn`; it ends when the last guard using this
    /// batcher is dropped. Must be called inside a tokio runtime.
    pub(crate) fn new(conn: RedisConn) -> Arc<Batcher> {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(send_batches(conn, rx));
        Arc::new(Batcher { tx })
    }

    /// Carries out `op` in the next batch; its answer, or the error of its batch's call.
    pub(super) async fn call(&self, op: Op) -> Result<Value, RedisError> {
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

async fn send_batches(conn: RedisConn, mut rx: mpsc::UnboundedReceiver<Queued>) {
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut queue =
        Queue::new(|q: &Queued| matches!(q.op.code, op::CLAIM | op::MANUAL | op::RENEW));
    while queue.wait(&mut rx).await {
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            return;
        };
        let batch = queue.take(&mut rx, MAX_BATCH).await;
        let conn = conn.clone();
        tokio::spawn(async move {
            let groups = conn.group_by_node(batch, |q| q.op.keys.first().map_or("", Arg::slot_str));
            futures_util::future::join_all(groups.into_iter().map(|g| call(conn.clone(), g))).await;
            drop(permit);
        });
    }
}

/// One call of the batch script for `batch`; every operation gets its answer or the call's error.
async fn call(mut conn: RedisConn, batch: Vec<Queued>) {
    let cmd = Op::script_call(batch.iter().map(|q| &q.op));
    let answers: Result<Vec<Value>, RedisError> = run_script(&mut conn, &cmd).await;
    match answers {
        Ok(answers) if answers.len() == batch.len() => {
            for (queued, answer) in batch.into_iter().zip(answers) {
                let _ = queued.reply.send(Ok(answer));
            }
        }
        Ok(answers) => {
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
