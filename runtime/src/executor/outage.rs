//! How often a job says that its guard cannot be reached: at the first failed request of an
//! outage, then once per [`SUMMARY_EVERY`] with the number of failures since, and once when the
//! guard answers again. An outage with a thousand jobs retrying their claims every second is a
//! few lines a minute, not thousands (docs/operations/metrics.md).

use std::time::Duration;

use tokio::time::Instant;

/// How often a job that still cannot reach its guard says so again.
pub(crate) const SUMMARY_EVERY: Duration = Duration::from_secs(60);

/// One job's outage of its guard, from its first failed request.
#[derive(Debug)]
pub(super) struct Outage {
    since: Instant,
    last_said: Instant,
    /// Failed requests since the outage began.
    failures: u64,
    /// Failed requests not yet said.
    unsaid: u64,
}

/// What to log for a failed request.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Say {
    /// The outage begins: say so.
    First,
    /// The outage goes on: say it with the count of failures since it was last said.
    StillFailing {
        failures: u64,
        for_how_long: Duration,
    },
    /// Nothing: it was said less than [`SUMMARY_EVERY`] ago.
    Nothing,
}

/// A request failed at `now`: what to log. `outage` is the job's outage, `None` while the guard
/// answers (kept out of line, so that a job without an outage carries one pointer).
pub(super) fn failed(outage: &mut Option<Box<Outage>>, now: Instant) -> Say {
    let Some(o) = outage else {
        *outage = Some(Box::new(Outage {
            since: now,
            last_said: now,
            failures: 1,
            unsaid: 0,
        }));
        return Say::First;
    };
    o.failures += 1;
    o.unsaid += 1;
    if now.saturating_duration_since(o.last_said) < SUMMARY_EVERY {
        return Say::Nothing;
    }
    let said = Say::StillFailing {
        failures: o.unsaid,
        for_how_long: now.saturating_duration_since(o.since),
    };
    o.last_said = now;
    o.unsaid = 0;
    said
}

/// A request succeeded at `now`: the outage it ends, as (failed requests, length), if any.
pub(super) fn answered(outage: &mut Option<Box<Outage>>, now: Instant) -> Option<(u64, Duration)> {
    outage
        .take()
        .map(|o| (o.failures, now.saturating_duration_since(o.since)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_said_once_then_summarised_once_a_minute_then_ended() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut outage = None;
        assert_eq!(failed(&mut outage, at(0)), Say::First);
        // Retries every second for two and a half minutes: two summaries, nothing else.
        let mut said = Vec::new();
        for s in 1..=150 {
            match failed(&mut outage, at(s)) {
                Say::Nothing => {}
                other => said.push((s, other)),
            }
        }
        assert_eq!(
            said,
            vec![
                (
                    60,
                    Say::StillFailing {
                        failures: 60,
                        for_how_long: Duration::from_secs(60)
                    }
                ),
                (
                    120,
                    Say::StillFailing {
                        failures: 60,
                        for_how_long: Duration::from_secs(120)
                    }
                ),
            ]
        );
        assert_eq!(
            answered(&mut outage, at(151)),
            Some((151, Duration::from_secs(151)))
        );
        assert_eq!(answered(&mut outage, at(152)), None);
        // The next outage is said again from its first failure.
        assert_eq!(failed(&mut outage, at(200)), Say::First);
    }
}
