//! The guard calls of the walk after downtime (docs/guide/downtime.md): reading a job's fate point
//! when it starts, and recording the fires it found missed.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::guard::{Guard, GuardErrorKind};
use crate::model::MissedFires;

/// How long one request for the fate point or a report of missed fires may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest pause between two reads of the fate point while the store cannot be reached.
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(5);
/// How often a report of missed fires whose reply was lost is sent before the process reports
/// them on its own word.
pub(crate) const REPORT_TRIES: u32 = 5;

/// Reads the job's fate point, asking again until the store answers: a process that starts while
/// the store is down catches up once it is back. Each failed read is told to `failed` (what
/// failed, and its kind for the metrics), as a failed claim would be.
pub(super) async fn read_fate_point(
    guard: &dyn Guard,
    failed: impl Fn(String, &'static str),
) -> Option<DateTime<Utc>> {
    let mut pause = Duration::from_millis(100);
    loop {
        match tokio::time::timeout(ASK_TIMEOUT, guard.fate_point()).await {
            Ok(Ok(point)) => return point,
            Ok(Err(e)) => failed(crate::error::Chain(&e).to_string(), e.kind().as_str()),
            Err(_) => failed(
                format!("no answer within {} ms", ASK_TIMEOUT.as_millis()),
                "timeout",
            ),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_RETRY_PAUSE);
    }
}

/// Records missed fires in the guard: the fate point it found before, or why it could not.
///
/// An answer after a try that got none is trusted only from a guard that
/// [repeats its answers](Guard::repeats_missed_answers): from another, the earlier try may have
/// recorded the fires, and the answer would then say that another process reported them. This
/// process then reports them on its own word (twice rather than never).
pub(super) async fn record_missed(
    guard: &dyn Guard,
    missed: MissedFires,
) -> Result<Option<DateTime<Utc>>, String> {
    let mut last_error = String::new();
    let repeats = guard.repeats_missed_answers();
    for attempt in 1..=REPORT_TRIES {
        match tokio::time::timeout(ASK_TIMEOUT, guard.report_missed(missed.first, missed.last))
            .await
        {
            Ok(Ok(before)) if attempt == 1 || repeats => return Ok(before),
            Ok(Ok(_)) => {
                return Err(format!(
                    "an earlier request got no answer ({last_error}) and may have recorded them"
                ))
            }
            // The store answered: it refused the report (a host whose clock is ahead, a store
            // that takes no writes), and sent again later it could be taken with an answer that
            // counts fires decided since as decided before. Only a lost reply is asked again.
            Ok(Err(e))
                if !matches!(
                    e.kind(),
                    GuardErrorKind::Unreachable | GuardErrorKind::Timeout
                ) =>
            {
                return Err(crate::error::Chain(&e).to_string())
            }
            Ok(Err(e)) => last_error = crate::error::Chain(&e).to_string(),
            Err(_) => last_error = format!("no answer within {} ms", ASK_TIMEOUT.as_millis()),
        }
        if attempt < REPORT_TRIES {
            tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
        }
    }
    Err(last_error)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::guard::{Claim, GuardError};
    use crate::model::MissedCause;
    use crate::registry::BoxFuture;

    /// A guard whose reports of missed fires all fail with `kind`, counting them.
    struct Failing {
        kind: GuardErrorKind,
        sent: AtomicU32,
    }

    impl Guard for Failing {
        fn claim(&self, _fire_time: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
            Box::pin(async { Err(GuardError::new(GuardErrorKind::Other, "unused")) })
        }

        fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
            Box::pin(async { Ok(None) })
        }

        fn report_missed(
            &self,
            _first: DateTime<Utc>,
            _last: DateTime<Utc>,
        ) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
            self.sent.fetch_add(1, Ordering::SeqCst);
            let kind = self.kind;
            Box::pin(async move { Err(GuardError::new(kind, "no")) })
        }
    }

    fn missed() -> MissedFires {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        MissedFires {
            first: at,
            last: at,
            count: 1,
            walked_all: true,
            cause: MissedCause::TimerWoke,
        }
    }

    /// A report the store refused is its answer: sent again once the store's clock has caught
    /// up, it could be taken with an answer that counts fires decided since as decided before.
    /// Only a report whose reply was lost is sent again.
    #[tokio::test(start_paused = true)]
    async fn a_refused_report_is_not_sent_again_a_lost_one_is() {
        for (kind, sent) in [
            (GuardErrorKind::Refused, 1),
            (GuardErrorKind::Invalid, 1),
            (GuardErrorKind::Unreachable, REPORT_TRIES),
            (GuardErrorKind::Timeout, REPORT_TRIES),
        ] {
            let guard = Failing {
                kind,
                sent: AtomicU32::new(0),
            };
            assert!(record_missed(&guard, missed()).await.is_err());
            assert_eq!(guard.sent.load(Ordering::SeqCst), sent, "{kind:?}");
        }
    }
}
