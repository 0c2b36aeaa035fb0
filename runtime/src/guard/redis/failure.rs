//! How requests to Redis fail, whatever the topology: their time limits, what counts as a server
//! that cannot be reached (rather than one that refuses), and the copy of an error handed to
//! every request that fails on it.

use std::time::Duration;

use redis::{ErrorKind, RedisError};

use crate::guard::{GuardError, GuardErrorKind};

/// How long a connection attempt may take before the server counts as unreachable.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a request may wait for its reply before it fails (and is retried by the job's model).
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether `e` says the server could not be reached (as opposed to refusing us).
pub(super) fn is_unreachable(e: &RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_refusal() || e.is_connection_dropped()
}

/// A failed request as a guard's failure, of the kind its error says.
pub(super) fn guard_error(e: RedisError) -> GuardError {
    let kind = if e.is_timeout() {
        GuardErrorKind::Timeout
    } else if is_unreachable(&e) {
        GuardErrorKind::Unreachable
    } else {
        GuardErrorKind::Refused
    };
    GuardError::new(kind, "the Redis request failed").with_source(e)
}

/// A claim that reached `acked` of the `wanted` replicas before its run may start.
pub(super) fn not_replicated(acked: u64, wanted: u32) -> GuardError {
    GuardError::new(
        GuardErrorKind::NotReplicated,
        format!("the claim reached {acked} of the {wanted} Redis replicas it must reach before the run starts (`Builder::redis_wait_for_replicas`); check that the replicas are up and keep up with the primary (`INFO replication`), or wait for fewer"),
    )
}

/// A renewal that reached `acked` of the `wanted` replicas: the lease is not extended.
pub(super) fn renewal_not_replicated(acked: u64, wanted: u32) -> GuardError {
    GuardError::new(
        GuardErrorKind::NotReplicated,
        format!("the lease renewal reached {acked} of the {wanted} Redis replicas it must reach to extend the lease (`Builder::redis_wait_for_replicas`), so the run keeps only the lease of the last renewal they acknowledged; check that the replicas are up and keep up with the primary (`INFO replication`), or wait for fewer"),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_request_has_the_kind_its_error_says() {
        let io = |kind| guard_error(std::io::Error::from(kind).into());
        assert_eq!(
            io(std::io::ErrorKind::ConnectionRefused).kind(),
            GuardErrorKind::Unreachable
        );
        assert_eq!(
            io(std::io::ErrorKind::TimedOut).kind(),
            GuardErrorKind::Timeout
        );
        let refused = guard_error(RedisError::from((
            ErrorKind::Client,
            "NOPERM",
            "no".to_owned(),
        )));
        assert_eq!(refused.kind(), GuardErrorKind::Refused);
        assert_eq!(refused.to_string(), "the Redis request failed");
        assert_eq!(not_replicated(0, 1).kind(), GuardErrorKind::NotReplicated);
        assert_eq!(
            renewal_not_replicated(0, 1).kind(),
            GuardErrorKind::NotReplicated
        );
    }
}
