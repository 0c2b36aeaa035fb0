//! [`Schedule`]: fire instants of a cron expression in a time zone, or of an epoch-aligned interval.
//!
//! croner walks the cron expression on naive wall-clock time; this module maps each scheduled
//! wall-clock time to instants with the zone's rules at that very time (never a frozen offset),
//! following cronie (docs/guide/fires.md):
//!
//! | wall-clock time            | fixed-time job                        | wildcard job        |
//! | -------------------------- | ------------------------------------- | ------------------- |
//! | exists once                | fires                                 | fires               |
//! | skipped (spring forward)   | fires once at the first instant after the gap | does not fire |
//! | repeated (fall back)       | fires at the first occurrence only    | fires at both       |

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

use crate::{parse_time_zone, CronError, CronExpr, ScheduleError};

/// How many scheduled wall-clock times one search may pass over before it gives up. Only times
/// whose instants lie at or before the start are passed over (inside a repeated hour, or in a
/// gap), so this bound is never reached by a real zone.
const MAX_PASSED_OVER: usize = 200_000;

/// When a job fires: a cron expression in a time zone, or a fixed interval aligned to the Unix epoch.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use cronguard_schedule::Schedule;
///
/// let schedule = Schedule::cron("30 2 * * *", "Europe/Berlin").expect("valid");
/// // 2026-03-29 is the spring-forward day in Berlin: 02:30 does not exist, the job runs at 03:00.
/// let start = Utc.with_ymd_and_hms(2026, 3, 28, 12, 0, 0).single().expect("valid");
/// let next = schedule.next_after(start).expect("fires");
/// assert_eq!(next, Utc.with_ymd_and_hms(2026, 3, 29, 1, 0, 0).single().expect("valid"));
/// ```
#[derive(Debug, Clone)]
pub struct Schedule {
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Cron { expr: Arc<CronExpr>, tz: Tz },
    Every { interval: Duration },
}

impl Schedule {
    /// A cron schedule in the named IANA time zone (see [`parse_time_zone`]).
    pub fn cron(expr: &str, tz: &str) -> Result<Self, ScheduleError> {
        let tz = parse_time_zone(tz)?;
        Self::cron_in(expr, tz)
    }

    /// A cron schedule in an already parsed time zone.
    pub fn cron_in(expr: &str, tz: Tz) -> Result<Self, ScheduleError> {
        let parsed = parsed(expr).map_err(|source| ScheduleError::Cron {
            expr: expr.to_owned(),
            source,
        })?;
        Ok(Schedule {
            kind: Kind::Cron { expr: parsed, tz },
        })
    }

    /// A cron schedule from an already validated expression.
    pub fn from_cron(expr: CronExpr, tz: Tz) -> Self {
        Schedule {
            kind: Kind::Cron {
                expr: Arc::new(expr),
                tz,
            },
        }
    }

    /// A fixed interval, aligned to the Unix epoch: it fires at every whole multiple of `interval`
    /// since 1970-01-01T00:00:00Z, so that every replica computes the same instants whenever it
    /// started. Fails for a zero interval.
    pub fn every(interval: Duration) -> Result<Self, ScheduleError> {
        if interval.is_zero() {
            return Err(ScheduleError::ZeroInterval);
        }
        Ok(Schedule {
            kind: Kind::Every { interval },
        })
    }

    /// The time zone of a cron schedule; `None` for an interval.
    pub fn time_zone(&self) -> Option<Tz> {
        match &self.kind {
            Kind::Cron { tz, .. } => Some(*tz),
            Kind::Every { .. } => None,
        }
    }

    /// The cron expression of a cron schedule; `None` for an interval.
    pub fn cron_expr(&self) -> Option<&CronExpr> {
        match &self.kind {
            Kind::Cron { expr, .. } => Some(expr),
            Kind::Every { .. } => None,
        }
    }

    /// The interval of an interval schedule; `None` for a cron schedule.
    pub fn interval(&self) -> Option<Duration> {
        match &self.kind {
            Kind::Cron { .. } => None,
            Kind::Every { interval } => Some(*interval),
        }
    }

    /// The shortest time between two consecutive fires by the schedule's rule: the interval of an
    /// interval schedule; for a cron schedule, the shortest time between two wall-clock times the
    /// expression matches — the smallest step, wrapping round, of the finest of its seconds,
    /// minutes and hours fields that selects more than one value, or one day when each of them
    /// selects one (the day, month and year fields only take fires away, so this is a lower
    /// bound).
    ///
    /// In a time zone that changes its UTC offset, two fires of a cron schedule near a change can
    /// come closer than this: `59 1,2 * * *` fires at 01:59 and, on a day the clocks skip from
    /// 02:00 to 03:00, at 03:00 for the 02:59 that does not exist, one minute later.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cronguard_schedule::Schedule;
    ///
    /// let quarter = Schedule::cron("0,15,30,45 9-17 * * MON-FRI", "UTC").expect("valid");
    /// assert_eq!(quarter.shortest_gap(), Duration::from_secs(15 * 60));
    /// let nightly = Schedule::cron("30 2 * * *", "Europe/Berlin").expect("valid");
    /// assert_eq!(nightly.shortest_gap(), Duration::from_secs(24 * 60 * 60));
    /// ```
    pub fn shortest_gap(&self) -> Duration {
        match &self.kind {
            Kind::Cron { expr, .. } => expr.shortest_wall_gap(),
            Kind::Every { interval } => *interval,
        }
    }

    /// Whether this is a cron schedule of the *wildcard* class (minute or hour field starting with
    /// `*`, or `@hourly`), which skips wall-clock times inside a daylight-saving gap and fires at
    /// both occurrences of a repeated time. `false` for fixed-time cron schedules and intervals.
    pub fn is_wildcard(&self) -> bool {
        self.cron_expr().is_some_and(CronExpr::is_wildcard)
    }

    /// The schedule in English words, for dashboards, logs and status pages: the time of day,
    /// the days, months and years, and the time zone in parentheses.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cronguard_schedule::Schedule;
    ///
    /// let nightly = Schedule::cron("30 2 * * *", "Europe/Berlin").expect("valid");
    /// assert_eq!(nightly.describe(), "at 02:30 every day (Europe/Berlin)");
    /// let office = Schedule::cron("*/15 9-17 * * MON-FRI", "UTC").expect("valid");
    /// assert_eq!(
    ///     office.describe(),
    ///     "every 15 minutes from 09:00 through 17:45, Monday to Friday (UTC)"
    /// );
    /// let every = Schedule::every(Duration::from_secs(30)).expect("valid");
    /// assert_eq!(every.describe(), "every 30 seconds");
    /// ```
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Cron { expr, tz } => {
                format!("{} ({})", crate::describe::cron(&expr.parsed), tz.name())
            }
            Kind::Every { interval } => crate::describe::interval(*interval),
        }
    }

    /// The first fire strictly after `after`, or `None` when the schedule never fires again.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            Kind::Every { interval } => {
                let step = i64::try_from(interval.as_nanos()).ok()?;
                let now = after.timestamp_nanos_opt()?;
                let next = now.div_euclid(step).checked_add(1)?.checked_mul(step)?;
                Some(DateTime::from_timestamp_nanos(next))
            }
            Kind::Cron { expr, tz } => crate::memo::next_after(expr, *tz, after, || {
                CronWalk { expr, tz }.next_after(after)
            }),
        }
    }

    /// The fires strictly after `after`, in ascending order, without repeats.
    pub fn fires_after(&self, after: DateTime<Utc>) -> Fires<'_> {
        Fires {
            schedule: self,
            last: Some(after),
        }
    }

    /// The last fire strictly before `before`, or `None` when the schedule never fired before
    /// it. The same daylight-saving rules as [`Schedule::next_after`] apply, so that for every
    /// fire `f`, `previous_before(next_after(t))` is the fire before it: "which fire should have
    /// happened last" needs no walk forward from an old instant.
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use cronguard_schedule::Schedule;
    ///
    /// let schedule = Schedule::cron("30 2 * * *", "Europe/Berlin").expect("valid");
    /// let now = Utc.with_ymd_and_hms(2026, 3, 29, 12, 0, 0).single().expect("valid");
    /// // 02:30 did not exist that morning: the fire was at 03:00 local, 01:00 UTC.
    /// let last = schedule.previous_before(now).expect("fired");
    /// assert_eq!(last, Utc.with_ymd_and_hms(2026, 3, 29, 1, 0, 0).single().expect("valid"));
    /// ```
    pub fn previous_before(&self, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            Kind::Every { interval } => {
                let step = i64::try_from(interval.as_nanos()).ok()?;
                let now = before.timestamp_nanos_opt()?;
                let previous = now.checked_sub(1)?.div_euclid(step).checked_mul(step)?;
                Some(DateTime::from_timestamp_nanos(previous))
            }
            Kind::Cron { expr, tz } => CronWalk { expr, tz }.previous_before(before),
        }
    }

    /// The fires strictly before `before`, in descending order, without repeats: the same
    /// instants as [`Schedule::fires_after`], walked backwards.
    pub fn fires_before(&self, before: DateTime<Utc>) -> FiresBefore<'_> {
        FiresBefore {
            schedule: self,
            last: Some(before),
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

/// Two schedules are equal when they are written alike: the same cron expression text in the
/// same time zone, or the same interval — so equal schedules also print alike. `@daily` and
/// `0 0 * * *` fire alike but are not equal.
impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        match (&self.kind, &other.kind) {
            (Kind::Cron { expr: a, tz: ta }, Kind::Cron { expr: b, tz: tb }) => {
                ta == tb && (Arc::ptr_eq(a, b) || a.as_str() == b.as_str())
            }
            (Kind::Every { interval: a }, Kind::Every { interval: b }) => a == b,
            _ => false,
        }
    }
}

impl Eq for Schedule {}

impl std::hash::Hash for Schedule {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match &self.kind {
            Kind::Cron { expr, tz } => {
                expr.as_str().hash(state);
                tz.hash(state);
            }
            Kind::Every { interval } => interval.hash(state),
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

/// Iterator over the fires of a [`Schedule`] backwards in time; see [`Schedule::fires_before`].
#[derive(Debug, Clone)]
pub struct FiresBefore<'a> {
    schedule: &'a Schedule,
    last: Option<DateTime<Utc>>,
}

impl Iterator for FiresBefore<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<Self::Item> {
        let previous = self.schedule.previous_before(self.last?);
        self.last = previous;
        previous
    }
}

/// The instants of one scheduled wall-clock time: none, one, or two (both occurrences of a
/// repeated time, earlier first).
type Instants = [Option<DateTime<Utc>>; 2];

/// The mapping from croner's naive walk to instants in one zone.
struct CronWalk<'a> {
    expr: &'a CronExpr,
    tz: &'a Tz,
}

impl CronWalk<'_> {
    fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // `naive_local` would panic at the very ends of chrono's range.
        let offset = self.tz.offset_from_utc_datetime(&after.naive_utc()).fix();
        let local = after.naive_utc().checked_add_offset(offset)?;
        let forward = self.first_from(local, after);
        let second_pass = if self.expr.is_wildcard() {
            self.later_occurrence_from_fold(after, local)
        } else {
            None
        };
        match (forward, second_pass) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The last fire before `before`: the mirror of [`Self::next_after`].
    fn previous_before(&self, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let offset = self.tz.offset_from_utc_datetime(&before.naive_utc()).fix();
        let local = before.naive_utc().checked_add_offset(offset)?;
        let backward = self.last_from(local, before);
        match (backward, self.earlier_occurrence_from_fold(before, local)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The last instant before `before` of a scheduled wall-clock time at or before `local`.
    ///
    /// Walking the wall clock down, instants shrink with it, with one exception: of a repeated
    /// time whose later instant is not before `before`, only the earlier instant counts, and a
    /// lower repeated time may still have a later instant before `before` (which beats every
    /// earlier one). So such an earlier instant is kept as a candidate and the walk goes on to
    /// the first time that yields an instant otherwise. The earlier occurrences of repeated times
    /// after `local` are covered by [`Self::earlier_occurrence_from_fold`].
    fn last_from(&self, local: NaiveDateTime, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // A time before `local` is at or before its whole second.
        let mut cursor = local.with_nanosecond(0)?;
        let mut inclusive = true;
        let mut candidate: Option<DateTime<Utc>> = None;
        for _ in 0..MAX_PASSED_OVER {
            let Some(wall) = self.expr.previous_naive(&cursor, inclusive) else {
                return candidate;
            };
            match self.instants(wall) {
                [Some(earlier), Some(later)] if later >= before && earlier < before => {
                    candidate = candidate.max(Some(earlier));
                }
                instants => {
                    let best = instants.into_iter().flatten().filter(|i| *i < before).max();
                    if best.is_some() {
                        return best.max(candidate);
                    }
                }
            }
            cursor = wall;
            inclusive = false;
        }
        candidate
    }

    /// When `before` lies in the later pass of a repeated wall-clock range, the scheduled times
    /// of that range after `before`'s wall clock fired in the earlier pass, before `before`: the
    /// last of those is the earlier instant of the last scheduled time before the range's end.
    fn earlier_occurrence_from_fold(
        &self,
        before: DateTime<Utc>,
        local: NaiveDateTime,
    ) -> Option<DateTime<Utc>> {
        let chrono::LocalResult::Ambiguous(earlier, later) = self.tz.from_local_datetime(&local)
        else {
            return None;
        };
        let offset_of =
            |instant: DateTime<Utc>| self.tz.offset_from_utc_datetime(&instant.naive_utc()).fix();
        let later_offset = later.offset().fix();
        let earlier_offset = earlier.offset().fix();
        if offset_of(before) != later_offset {
            return None;
        }
        // The clock turned back at the first instant with the later offset, in (earlier, before].
        let transition = first_instant_where(earlier.timestamp(), before.timestamp(), |instant| {
            offset_of(instant) == later_offset
        })?;
        let range_end = transition.naive_utc().checked_add_offset(earlier_offset)?;
        let wall = self.expr.previous_naive(&range_end, false)?;
        match self.tz.from_local_datetime(&wall) {
            chrono::LocalResult::Ambiguous(first, _) => {
                Some(first.with_timezone(&Utc)).filter(|i| *i < before)
            }
            _ => None,
        }
    }

    /// The first instant after `after` of a scheduled wall-clock time later than `local`.
    ///
    /// Instants grow with their wall-clock time (gaps map forward to their end, and of a repeated
    /// time the earlier instant comes first), so the first wall-clock time that yields an instant
    /// after `after` yields the answer — except for the later occurrences of repeated times at or
    /// before `local`, which [`Self::later_occurrence_from_fold`] covers.
    fn first_from(&self, local: NaiveDateTime, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // croner works in whole seconds; a time later than `local` is later than its whole second.
        let mut cursor = local.with_nanosecond(0)?;
        for _ in 0..MAX_PASSED_OVER {
            let wall = self.expr.next_naive(&cursor, false)?;
            if let Some(instant) = self
                .instants(wall)
                .into_iter()
                .flatten()
                .find(|i| *i > after)
            {
                return Some(instant);
            }
            cursor = wall;
        }
        None
    }

    /// When `after` lies in the earlier pass of a repeated wall-clock range, a wildcard job also
    /// fires at the later pass of the scheduled times at or before `after`'s wall clock: the first
    /// of those is the later instant of the first scheduled time from the start of the range.
    fn later_occurrence_from_fold(
        &self,
        after: DateTime<Utc>,
        local: NaiveDateTime,
    ) -> Option<DateTime<Utc>> {
        let chrono::LocalResult::Ambiguous(earlier, later) = self.tz.from_local_datetime(&local)
        else {
            return None;
        };
        let offset_of =
            |instant: DateTime<Utc>| self.tz.offset_from_utc_datetime(&instant.naive_utc()).fix();
        let later_offset = later.offset().fix();
        if offset_of(after) != earlier.offset().fix() {
            return None;
        }
        // The clock turns back at the first instant with the later offset, in (after, later].
        let transition = first_instant_where(after.timestamp(), later.timestamp(), |instant| {
            offset_of(instant) == later_offset
        })?;
        let range_start = transition.with_timezone(self.tz).naive_local();
        let wall = self.expr.next_naive(&range_start, true)?;
        match self.tz.from_local_datetime(&wall) {
            chrono::LocalResult::Ambiguous(_, second) => {
                Some(second.with_timezone(&Utc)).filter(|i| *i > after)
            }
            _ => None,
        }
    }

    /// The instants at which one scheduled wall-clock time fires.
    fn instants(&self, wall: NaiveDateTime) -> Instants {
        let wildcard = self.expr.is_wildcard();
        match self.tz.from_local_datetime(&wall) {
            chrono::LocalResult::Single(instant) => [Some(instant.with_timezone(&Utc)), None],
            chrono::LocalResult::Ambiguous(earlier, later) => [
                Some(earlier.with_timezone(&Utc)),
                wildcard.then(|| later.with_timezone(&Utc)),
            ],
            chrono::LocalResult::None if wildcard => [None, None],
            chrono::LocalResult::None => [gap_end(self.tz, wall), None],
        }
    }
}

/// The first instant after the daylight-saving gap that contains the wall-clock time `wall`.
fn gap_end(tz: &Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    let as_utc = wall.and_utc();
    let offset_at = |instant: DateTime<Utc>| {
        i64::from(
            tz.offset_from_utc_datetime(&instant.naive_utc())
                .fix()
                .local_minus_utc(),
        )
    };
    let local_of = |instant: DateTime<Utc>| instant + TimeDelta::seconds(offset_at(instant));
    // The offsets a day either side are the ones before and after the gap; the gap starts at the
    // instant T where the wall clock jumps past `wall`: read with the offset before, `wall` lies
    // at or after T, read with the offset after, before T.
    let before = offset_at(as_utc - TimeDelta::days(1));
    let after = offset_at(as_utc + TimeDelta::days(1));
    let high = as_utc - TimeDelta::seconds(before);
    let low = as_utc - TimeDelta::seconds(after);
    let past_wall = |instant: DateTime<Utc>| local_of(instant).naive_utc() > wall;
    if low < high && !past_wall(low) && past_wall(high) {
        return first_instant_where(low.timestamp(), high.timestamp(), past_wall);
    }
    // A zone with two changes within a day: scan the wall clock forward minute by minute, then
    // second by second, for the first time that exists.
    let resolve = |t: NaiveDateTime| tz.from_local_datetime(&t).earliest();
    let mut probe = wall;
    for _ in 0..(48 * 60) {
        probe += TimeDelta::minutes(1);
        if resolve(probe).is_some() {
            let mut exact = probe - TimeDelta::minutes(1);
            for _ in 0..60 {
                exact += TimeDelta::seconds(1);
                if let Some(instant) = resolve(exact) {
                    return Some(instant.with_timezone(&Utc));
                }
            }
        }
    }
    None
}

/// The first whole second in `(low, high]` (Unix seconds) where `holds` is true, for a predicate
/// that is false at `low`, true at `high` and changes once in between.
fn first_instant_where(
    mut low: i64,
    mut high: i64,
    holds: impl Fn(DateTime<Utc>) -> bool,
) -> Option<DateTime<Utc>> {
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if holds(DateTime::from_timestamp(mid, 0)?) {
            high = mid;
        } else {
            low = mid;
        }
    }
    DateTime::from_timestamp(high, 0)
}

/// Parsed expressions, shared: a service with thousands of jobs on a few expressions parses (and
/// stores) each expression once. Bounded, so that generated expressions cannot grow it forever.
fn parsed(expr: &str) -> Result<Arc<CronExpr>, CronError> {
    const MAX_CACHED: usize = 1024;
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<CronExpr>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(hit) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(expr)
    {
        return Ok(Arc::clone(hit));
    }
    let fresh = Arc::new(CronExpr::parse(expr)?);
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() < MAX_CACHED {
        cache.insert(expr.to_owned(), Arc::clone(&fresh));
    }
    Ok(fresh)
}

#[cfg(test)]
mod tests {
    use chrono::{LocalResult, NaiveDate};
    use chrono_tz::TZ_VARIANTS;

    use super::*;

    fn at(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        NaiveDate::from_ymd_opt(y, m, d)
            .and_then(|date| date.and_hms_opt(h, min, 0))
            .expect("valid date")
            .and_utc()
    }

    /// The shortest gap is the finest field's smallest step, wrapping round, and in UTC never
    /// more than a gap between two fires.
    #[test]
    fn the_shortest_gap_is_the_finest_fields_smallest_step_and_a_lower_bound_in_utc() {
        let cases = [
            ("*/7 * * * *", 4 * 60), // 56 → 0 of the next hour
            ("0,45 * * * *", 15 * 60),
            ("10,50 * * * * *", 20),
            ("0 8,20 * * *", 12 * 60 * 60),
            ("0 22,1 * * *", 3 * 60 * 60), // 22:00 → 01:00
            ("30 2 * * *", 24 * 60 * 60),
            ("0 0 1 * *", 24 * 60 * 60), // a lower bound: a month apart
            ("0 9-17 * * MON-FRI", 60 * 60),
        ];
        let start = at(2026, 1, 1, 0, 0);
        for (expr, secs) in cases {
            let schedule = Schedule::cron(expr, "UTC").expect("valid");
            let gap = schedule.shortest_gap();
            assert_eq!(gap, Duration::from_secs(secs), "{expr}");
            let fires: Vec<_> = schedule.fires_after(start).take(500).collect();
            for pair in fires.windows(2) {
                let between = (pair[1] - pair[0]).to_std().expect("ascending");
                assert!(between >= gap, "{expr}: {pair:?}");
            }
        }
        let every = Schedule::every(Duration::from_millis(1_500)).expect("valid");
        assert_eq!(every.shortest_gap(), Duration::from_millis(1_500));
    }

    /// Equal when written alike, and equal ones hash alike; firing alike is not enough.
    #[test]
    fn schedules_are_equal_when_written_alike() {
        use std::hash::{BuildHasher, RandomState};
        let hashes = RandomState::new();
        let cron = |e: &str, tz: &str| Schedule::cron(e, tz).expect("valid");
        let pairs = [
            (cron("0 0 * * *", "UTC"), cron("0 0 * * *", "UTC"), true),
            (
                cron("0 0 * * *", "UTC"),
                cron("0 0 * * *", "Europe/Berlin"),
                false,
            ),
            (cron("0 0 * * *", "UTC"), cron("@daily", "UTC"), false),
            (cron("0 0 * * *", "UTC"), cron("0 1 * * *", "UTC"), false),
            (
                Schedule::every(Duration::from_secs(30)).expect("valid"),
                Schedule::every(Duration::from_secs(30)).expect("valid"),
                true,
            ),
            (
                Schedule::every(Duration::from_secs(30)).expect("valid"),
                Schedule::every(Duration::from_secs(31)).expect("valid"),
                false,
            ),
        ];
        for (a, b, equal) in pairs {
            assert_eq!(a == b, equal, "{a} == {b}");
            if equal {
                assert_eq!(hashes.hash_one(&a), hashes.hash_one(&b), "{a}");
            }
        }
    }

    /// The first instant after a gap, found by the slowest possible scan.
    fn gap_end_by_scan(tz: &Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
        let mut probe = wall;
        for _ in 0..(48 * 3600) {
            probe += TimeDelta::seconds(1);
            if let Some(instant) = tz.from_local_datetime(&probe).earliest() {
                return Some(instant.with_timezone(&Utc));
            }
        }
        None
    }

    /// In every zone of the database, the daily fixed-time jobs at midnight and at 02:30 fire
    /// once per day, ascending, at the scheduled wall-clock time or else at the end of its gap.
    #[test]
    fn fixed_time_jobs_in_every_zone() {
        let start = at(2025, 12, 31, 0, 0);
        for expr in ["0 0 * * *", "30 2 * * *"] {
            for tz in TZ_VARIANTS {
                let schedule = Schedule::cron_in(expr, tz).expect("valid");
                let fires: Vec<_> = schedule.fires_after(start).take(366).collect();
                assert_eq!(fires.len(), 366, "{expr} in {tz}");
                for pair in fires.windows(2) {
                    assert!(pair[0] < pair[1], "{expr} in {tz}: {pair:?}");
                }
                let (hour, minute) = if expr == "0 0 * * *" { (0, 0) } else { (2, 30) };
                for fire in fires {
                    let local = fire.with_timezone(&tz).naive_local();
                    let wall = local.date().and_hms_opt(hour, minute, 0).expect("valid");
                    if local != wall {
                        // The scheduled time did not exist: it lies in a gap on the fire's day
                        // (or the day before, for a gap across midnight) and this is its end.
                        let scheduled = [wall, wall - TimeDelta::days(1)]
                            .into_iter()
                            .find(|w| matches!(tz.from_local_datetime(w), LocalResult::None))
                            .unwrap_or_else(|| panic!("{expr} in {tz}: unexpected {local}"));
                        assert_eq!(
                            Some(fire),
                            gap_end_by_scan(&tz, scheduled),
                            "{expr} in {tz}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn gap_end_matches_a_scan() {
        let cases = [
            (Tz::Europe__Berlin, "2026-03-29T02:30:00"),
            (Tz::America__New_York, "2026-03-08T02:00:00"),
            (Tz::Australia__Lord_Howe, "2026-10-04T02:15:00"),
            (Tz::America__Havana, "2026-03-08T00:30:00"),
        ];
        for (tz, wall) in cases {
            let wall: NaiveDateTime = wall.parse().expect("valid");
            assert!(
                tz.from_local_datetime(&wall).earliest().is_none(),
                "{tz} {wall}"
            );
            assert_eq!(
                gap_end(&tz, wall),
                gap_end_by_scan(&tz, wall),
                "{tz} {wall}"
            );
        }
    }

    #[test]
    fn extreme_instants_do_not_panic() {
        let schedules = [
            Schedule::cron("*/15 * * * *", "Europe/Berlin").expect("valid"),
            Schedule::cron("30 2 * * *", "Australia/Lord_Howe").expect("valid"),
            Schedule::cron("0 0 0 1 1 * 2030", "UTC").expect("valid"),
            Schedule::every(Duration::from_secs(60)).expect("valid"),
            Schedule::every(Duration::MAX).expect("valid"),
        ];
        for schedule in &schedules {
            for instant in [DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC] {
                let _ = schedule.next_after(instant);
            }
        }
        assert_eq!(schedules[2].next_after(at(2031, 1, 1, 0, 0)), None);
    }
}
