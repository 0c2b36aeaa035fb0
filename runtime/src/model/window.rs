//! The fires a job's timer has seen, for the health check.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::clock::after;

/// The fires a job's timer has seen, kept just long enough to answer "which fire should have
/// started by now": the newest fire past its grace, and the ones still within it.
///
/// A job that fires every second with a minute of grace has sixty fires in its window, so fires
/// are kept as arithmetic runs (`first`, `first + step`, ...): one run for a periodic schedule.
#[derive(Debug, Default)]
pub(crate) struct FireWindow {
    /// The oldest run, kept inline: a periodic job never needs more.
    head: Option<FireRun>,
    /// Later runs, behind one pointer: most jobs never have any.
    #[allow(clippy::box_collection)] // 8 bytes in every job instead of 32: few ever use it
    rest: Option<Box<std::collections::VecDeque<FireRun>>>,
}

#[derive(Debug, Clone, Copy)]
struct FireRun {
    first: DateTime<Utc>,
    /// Microseconds between fires; 0 while the run holds one fire.
    step_us: i64,
    count: u32,
}

impl FireRun {
    fn nth(&self, k: u32) -> DateTime<Utc> {
        let offset = u64::try_from(self.step_us.saturating_mul(i64::from(k))).unwrap_or(0);
        after(self.first, Duration::from_micros(offset))
    }

    /// [`nth`](FireRun::nth) in microseconds since the epoch: the window's bookkeeping, once
    /// per fire, needs no calendar arithmetic.
    fn nth_us(&self, k: u32) -> i64 {
        micros(self.first).saturating_add(self.step_us.saturating_mul(i64::from(k)))
    }
}

fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

impl FireWindow {
    pub(crate) fn observe(&mut self, fire: DateTime<Utc>, now: DateTime<Utc>, grace: Duration) {
        self.push(fire);
        let (now, grace) = (
            micros(now),
            i64::try_from(grace.as_micros()).unwrap_or(i64::MAX),
        );
        while self
            .second_us()
            .is_some_and(|t| t.saturating_add(grace) <= now)
        {
            self.pop_first();
        }
    }

    fn push(&mut self, fire: DateTime<Utc>) {
        let last_rest = self.rest.as_mut().and_then(|r| r.back_mut());
        if let Some(run) = last_rest.or(self.head.as_mut()) {
            let gap = micros(fire).saturating_sub(run.nth_us(run.count - 1));
            if gap > 0 && run.count < u32::MAX && (run.count == 1 || gap == run.step_us) {
                run.step_us = gap;
                run.count += 1;
                return;
            }
        }
        let run = FireRun {
            first: fire,
            step_us: 0,
            count: 1,
        };
        if self.head.is_none() {
            self.head = Some(run);
        } else {
            self.rest.get_or_insert_with(Box::default).push_back(run);
        }
    }

    /// The second-oldest fire kept, in microseconds since the epoch.
    fn second_us(&self) -> Option<i64> {
        let front = self.head.as_ref()?;
        if front.count > 1 {
            Some(front.nth_us(1))
        } else {
            self.rest
                .as_ref()
                .and_then(|r| r.front())
                .map(|r| micros(r.first))
        }
    }

    fn pop_first(&mut self) {
        let Some(front) = self.head.as_mut() else {
            return;
        };
        if front.count > 1 {
            front.first = front.nth(1);
            front.count -= 1;
        } else {
            self.head = self.rest.as_mut().and_then(|r| r.pop_front());
            if self.rest.as_ref().is_some_and(|r| r.is_empty()) {
                self.rest = None;
            }
        }
    }

    /// Observes a fire older than every fire observed so far (found after them: the walk after
    /// downtime runs once the timer took the fires after the start).
    pub(crate) fn observe_before(&mut self, fire: DateTime<Utc>) {
        let Some(head) = self.head.as_mut() else {
            self.head = Some(FireRun {
                first: fire,
                step_us: 0,
                count: 1,
            });
            return;
        };
        let gap = micros(head.first).saturating_sub(micros(fire));
        if gap <= 0 {
            return;
        }
        if head.count < u32::MAX && (head.count == 1 || gap == head.step_us) {
            head.step_us = gap;
            head.first = fire;
            head.count += 1;
            return;
        }
        let old = std::mem::replace(
            head,
            FireRun {
                first: fire,
                step_us: 0,
                count: 1,
            },
        );
        self.rest.get_or_insert_with(Box::default).push_front(old);
    }

    /// The newest observed fire.
    pub(crate) fn newest(&self) -> Option<DateTime<Utc>> {
        let last_rest = self.rest.as_ref().and_then(|r| r.back());
        last_rest
            .or(self.head.as_ref())
            .map(|run| run.nth(run.count - 1))
    }

    /// The newest observed fire whose grace had passed at `now`.
    pub(crate) fn due_by(&self, now: DateTime<Utc>, grace: Duration) -> Option<DateTime<Utc>> {
        let rest = self.rest.iter().flat_map(|r| r.iter().rev());
        for run in rest.chain(self.head.iter()) {
            if after(run.first, grace) > now {
                continue;
            }
            if run.count == 1 || run.step_us <= 0 {
                return Some(run.first);
            }
            // The largest k with first + k * step + grace <= now.
            let past = (now - after(run.first, grace))
                .num_microseconds()
                .unwrap_or(i64::MAX);
            let k = u32::try_from(past / run.step_us)
                .unwrap_or(u32::MAX)
                .min(run.count - 1);
            return Some(run.nth(k));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp_millis(1_700_000_000_000 + ms).expect("in range")
    }

    /// The window against a plain list of every observed fire.
    #[test]
    fn the_window_answers_like_a_list_of_every_fire() {
        let grace = Duration::from_millis(2_500);
        // Regular, irregular, and a jump (a pause or a sparse cron).
        let fires: Vec<i64> = (0..20)
            .map(|i| i * 1_000)
            .chain([20_500, 21_000, 21_700, 30_000, 31_000, 32_000, 32_001])
            .collect();
        let mut window = FireWindow::default();
        let mut seen = Vec::new();
        for (i, &f) in fires.iter().enumerate() {
            let now = at(f + 300);
            window.observe(at(f), now, grace);
            seen.push(at(f));
            let next = fires.get(i + 1).copied().unwrap_or(f + 10_000);
            for q in (f + 300..next + 300).step_by(100) {
                let now = at(q);
                let expected = seen
                    .iter()
                    .rev()
                    .find(|t| after(**t, grace) <= now)
                    .copied();
                assert_eq!(window.due_by(now, grace), expected, "fire {f}, query {q}");
            }
        }
        assert!(
            window.rest.as_ref().map_or(0, |r| r.len()) <= 2,
            "{window:?}"
        );
    }

    #[test]
    fn fires_observed_late_count_like_the_others() {
        let grace = Duration::from_millis(2_500);
        let mut window = FireWindow::default();
        window.observe(at(16_000), at(16_000), grace);
        for f in [14_000, 12_000, 11_000] {
            window.observe_before(at(f));
        }
        assert_eq!(window.due_by(at(16_300), grace), Some(at(12_000)));
        assert_eq!(window.due_by(at(14_000), grace), Some(at(11_000)));
        assert_eq!(window.due_by(at(18_600), grace), Some(at(16_000)));
        assert_eq!(window.newest(), Some(at(16_000)));
    }

    #[test]
    fn a_periodic_job_keeps_one_run() {
        let grace = Duration::from_secs(60);
        let mut window = FireWindow::default();
        for s in 0..1_000 {
            window.observe(at(s * 1_000), at(s * 1_000), grace);
        }
        assert!(window.rest.is_none(), "{window:?}");
        assert_eq!(window.head.map(|r| r.count), Some(61));
        assert_eq!(window.due_by(at(999_000), grace), Some(at(939_000)));
        assert_eq!(window.newest(), Some(at(999_000)));
    }
}
