//! `lock = "local"`: at most `max_instances` runs at once and each fire once, in this process.
//!
//! The job's own slot in the scheduler holds this guard, so a claim takes no lock and allocates
//! nothing: it is a comparison and a counter.

use chrono::{DateTime, Utc};

pub(crate) struct LocalGuard {
    max_instances: u32,
    last_claimed: Option<DateTime<Utc>>,
    last_token: u64,
}

/// The answer of a [`LocalGuard`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LocalClaim {
    /// The fire may run, with this fencing token.
    Acquired { token: u64 },
    /// This fire, or a later one, was already claimed.
    AlreadyRan,
    /// `max_instances` runs are going on.
    Busy,
}

impl LocalGuard {
    pub(crate) fn new(max_instances: u32) -> Self {
        LocalGuard {
            max_instances,
            last_claimed: None,
            last_token: 0,
        }
    }

    /// Claims `fire_time` while `running` runs of the job are going on.
    pub(crate) fn claim(&mut self, fire_time: DateTime<Utc>, running: usize) -> LocalClaim {
        if self.last_claimed.is_some_and(|last| last >= fire_time) {
            return LocalClaim::AlreadyRan;
        }
        if running >= self.max_instances as usize {
            return LocalClaim::Busy;
        }
        self.last_claimed = Some(fire_time);
        self.last_token += 1;
        LocalClaim::Acquired {
            token: self.last_token,
        }
    }

    /// The latest fire claimed.
    pub(crate) fn last_claimed(&self) -> Option<DateTime<Utc>> {
        self.last_claimed
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(20_000) + TimeDelta::seconds(s)
    }

    /// The checks of the guard conformance suite, for the in-process guard.
    #[test]
    fn exclusion_uniqueness_and_rising_tokens() {
        let mut guard = LocalGuard::new(1);
        let LocalClaim::Acquired { token: t1 } = guard.claim(t(10), 0) else {
            panic!("the first claim is acquired");
        };
        assert_eq!(guard.claim(t(20), 1), LocalClaim::Busy, "held: busy");
        assert_eq!(guard.claim(t(10), 1), LocalClaim::AlreadyRan, "same fire");
        assert_eq!(guard.claim(t(5), 0), LocalClaim::AlreadyRan, "older fire");
        assert_eq!(
            guard.claim(t(10), 0),
            LocalClaim::AlreadyRan,
            "after release"
        );
        assert_eq!(guard.last_claimed(), Some(t(10)));
        let mut last = t1;
        for fire in 20..40 {
            let LocalClaim::Acquired { token } = guard.claim(t(fire), 0) else {
                panic!("fire {fire} is acquired");
            };
            assert!(token > last, "fencing tokens rise");
            last = token;
        }
        assert_eq!(guard.last_claimed(), Some(t(39)));
    }

    #[test]
    fn max_instances_runs_at_once() {
        let mut guard = LocalGuard::new(2);
        assert!(matches!(guard.claim(t(1), 0), LocalClaim::Acquired { .. }));
        assert!(matches!(guard.claim(t(2), 1), LocalClaim::Acquired { .. }));
        assert_eq!(guard.claim(t(3), 2), LocalClaim::Busy);
        assert_eq!(
            guard.last_claimed(),
            Some(t(2)),
            "a busy fire is not claimed"
        );
    }
}
