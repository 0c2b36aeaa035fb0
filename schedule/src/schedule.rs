use std::fmt;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use chrono_tz::Tz;

use crate::{parse_time_zone, CronExpr, ScheduleError};

/// When a job fires: a cron expression in a time zone, or a fixed interval aligned to the Unix epoch.
#[derive(Debug, Clone)]
pub struct Schedule {
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Cron { expr: CronExpr, tz: Tz },
    Every { interval: Duration },
}

impl Schedule {
    /// A cron schedule in the named IANA time zone.
    pub fn cron(expr: &str, tz: &str) -> Result<Self, ScheduleError> {
        let tz = parse_time_zone(tz)?;
        let expr = CronExpr::parse(expr).map_err(|source| ScheduleError::Cron {
            expr: expr.to_owned(),
            source,
        })?;
        Ok(Schedule {
            kind: Kind::Cron { expr, tz },
        })
    }

    /// A fixed interval, aligned to the Unix epoch.
    pub fn every(interval: Duration) -> Result<Self, ScheduleError> {
        if interval.is_zero() {
            return Err(ScheduleError::ZeroInterval);
        }
        Ok(Schedule {
            kind: Kind::Every { interval },
        })
    }

    /// The first fire strictly after `after`, or `None` when the schedule never fires again.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            Kind::Every { interval } => {
                let step = i64::try_from(interval.as_nanos()).ok()?;
                let now = after.timestamp_nanos_opt()?;
                let next = (now.div_euclid(step) + 1).checked_mul(step)?;
                Some(DateTime::<Utc>::UNIX_EPOCH + TimeDelta::nanoseconds(next))
            }
            Kind::Cron { expr, tz } => {
                let local = after.with_timezone(tz);
                expr.cron
                    .find_next_occurrence(&local, false)
                    .ok()
                    .map(|t| t.with_timezone(&Utc))
            }
        }
    }

    /// The fires strictly after `after`, in ascending order.
    pub fn fires_after(&self, after: DateTime<Utc>) -> Fires<'_> {
        Fires {
            schedule: self,
            last: Some(after),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Cron { expr, tz } => write!(f, "cron `{}` in {}", expr.as_str(), tz.name()),
            Kind::Every { interval } => {
                write!(f, "every {}", humantime::format_duration(*interval))
            }
        }
    }
}

/// Iterator over the fires of a [`Schedule`]; see [`Schedule::fires_after`].
#[derive(Debug, Clone)]
pub struct Fires<'a> {
    schedule: &'a Schedule,
    last: Option<DateTime<Utc>>,
}

impl Iterator for Fires<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = self.schedule.next_after(self.last?);
        self.last = next;
        next
    }
}
