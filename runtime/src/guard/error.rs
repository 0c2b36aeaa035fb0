//! What a guard's failure is. Each guard decides the [`GuardErrorKind`] where it meets its
//! store's own error, so that the scheduler, the metrics and the user's code read the kind
//! without knowing the guard, and no store client's error type is part of the public API.

use std::borrow::Cow;
use std::fmt;

/// A guard could not answer (its backing store failed). The scheduler retries until the fire's
/// grace runs out and then reports a misfire with this reason.
///
/// Its `Display` says what failed; the cause, when there is one, is its
/// [`source`](std::error::Error::source) only, so that a report of the whole chain (anyhow's
/// `{:#}`, or cronguard's own logs) names every cause once. A guard of one's own builds its
/// errors with [`GuardError::new`] (choosing the kind) or [`GuardError::other`].
pub struct GuardError {
    kind: GuardErrorKind,
    message: Cow<'static, str>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// What kind of failure a [`GuardError`] is; also the `kind` label of
/// `cronguard_guard_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GuardErrorKind {
    /// The store could not be reached: no connection, or the connection was lost.
    Unreachable,
    /// The store did not answer in time.
    Timeout,
    /// The store answered with an error (a refused statement, a rejected password, a full disk).
    Refused,
    /// The claim was acquired, but fewer replicas of the store than asked for acknowledged it in
    /// time (`Builder::redis_wait_for_replicas`), so its run does not start: a failover now could
    /// lose the claim. The claim is retried (as the same claimant) until the fire's grace runs out.
    NotReplicated,
    /// The store answered something this version cannot use, or a setting is out of range; the
    /// message says what to do.
    Invalid,
    /// The guard does not offer what was asked (a control such as pause or run now).
    Unsupported,
    /// Anything else: a lock file that cannot be used, a guard task that panicked, a failure of a
    /// guard of one's own.
    Other,
}

impl GuardErrorKind {
    /// The kind as the `kind` label of `cronguard_guard_errors_total`: `unreachable`, `timeout`,
    /// `refused`, `not_replicated`, `invalid`, `unsupported` or `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            GuardErrorKind::Unreachable => "unreachable",
            GuardErrorKind::Timeout => "timeout",
            GuardErrorKind::Refused => "refused",
            GuardErrorKind::NotReplicated => "not_replicated",
            GuardErrorKind::Invalid => "invalid",
            GuardErrorKind::Unsupported => "unsupported",
            GuardErrorKind::Other => "other",
        }
    }
}

impl fmt::Display for GuardErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl GuardError {
    /// A failure of `kind` that says `message` (what failed, and what to do where the reader
    /// can do something). Add the store's own error with [`with_source`](Self::with_source).
    pub fn new(kind: GuardErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        GuardError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// This error with `source` as its cause (shown by reports of the whole chain, not by this
    /// error's own `Display`).
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        self.source = Some(source.into());
        self
    }

    /// A failure of a guard of the user's own, of kind [`GuardErrorKind::Other`], keeping its
    /// error as the source (a `String` or `&str` is accepted too).
    pub fn other(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        GuardError::new(GuardErrorKind::Other, "the guard failed").with_source(error)
    }

    /// The answer of a guard that does not offer `what` (for example `"pause"`, `"run now"`).
    pub fn unsupported(what: &'static str) -> Self {
        GuardError::new(
            GuardErrorKind::Unsupported,
            format!("this guard does not support {what}"),
        )
    }

    /// An answer or setting this version cannot use; `message` says what to do.
    #[cfg_attr(not(any(feature = "redis", feature = "postgres")), allow(dead_code))]
    pub(crate) fn invalid(message: impl Into<Cow<'static, str>>) -> Self {
        GuardError::new(GuardErrorKind::Invalid, message)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> GuardErrorKind {
        self.kind
    }
}

impl fmt::Display for GuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for GuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("GuardError");
        d.field("kind", &self.kind).field("message", &self.message);
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl std::error::Error for GuardError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn the_message_and_the_source_are_shown_once_each() {
        let e = GuardError::other("etcd is down");
        assert_eq!(e.to_string(), "the guard failed");
        assert_eq!(
            e.source().map(ToString::to_string).as_deref(),
            Some("etcd is down")
        );
        assert_eq!(e.kind(), GuardErrorKind::Other);
        let unsupported = GuardError::unsupported("pause");
        assert_eq!(unsupported.to_string(), "this guard does not support pause");
        assert!(unsupported.source().is_none());
        assert_eq!(unsupported.kind().as_str(), "unsupported");
    }
}
