//! How requests to Redis fail, whatever the topology: their time limits, what counts as a server
//! that cannot be reached (rather than one that refuses), and the copy of an error handed to
//! every request that fails on it.

use std::time::Duration;

use redis::{ErrorKind, RedisError};

/// How long a connection attempt may take before the server counts as unreachable.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a request may wait for its reply before it fails (and is retried by the job's model).
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether `e` says the server could not be reached (as opposed to refusing us).
pub(super) fn is_unreachable(e: &RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_refusal() || e.is_connection_dropped()
}

/// The `kind` label of a failed request (see `GuardError::kind`).
pub(crate) fn kind(e: &RedisError) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if is_unreachable(e) {
        "unreachable"
    } else {
        "refused"
    }
}

/// A copy of `e` to hand to every request that fails on it: its kind and its text.
pub(super) fn clone_error(e: &RedisError) -> RedisError {
    let kind = if e.is_timeout() || e.is_io_error() {
        ErrorKind::Io
    } else {
        e.kind()
    };
    RedisError::from((kind, "no connection to Redis", e.to_string()))
}
