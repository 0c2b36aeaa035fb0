//! Recording a run, identical on every side: `Utc::now() - T` at the start of the body, into a
//! pre-allocated slot per (job, fire of the window) — a compare-and-swap, so that a second run of
//! a slot counts as duplicated and an empty slot as missed.

use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering};

use chrono::{DateTime, Utc};

/// A slot whose fire has not run.
pub const NOT_RUN: i32 = i32::MIN;

/// One slot per (job, fire of the measured window): the lateness in µs of the first run.
pub struct Recorder {
    /// Fires per job in the window.
    pub slots: usize,
    /// Seconds between two fires of a job.
    step: i64,
    /// The first measured fire instant (whole seconds since the epoch); `i64::MAX` until known.
    pub window_start: AtomicI64,
    pub lateness_us: Box<[AtomicI32]>,
    pub duplicated: AtomicU64,
    /// Runs whose `T` lies outside the window (warm-up and after).
    pub outside: AtomicU64,
    /// Runs whose `T` is not on the grid of `step` whole seconds.
    pub misaligned: AtomicU64,
}

impl Recorder {
    pub fn new(jobs: usize, slots: usize, step_seconds: u64) -> Self {
        Recorder {
            slots,
            step: i64::try_from(step_seconds.max(1)).expect("a step in range"),
            window_start: AtomicI64::new(i64::MAX),
            lateness_us: (0..jobs * slots).map(|_| AtomicI32::new(NOT_RUN)).collect(),
            duplicated: AtomicU64::new(0),
            outside: AtomicU64::new(0),
            misaligned: AtomicU64::new(0),
        }
    }

    /// Leaks a recorder, so that job bodies can hold it as `&'static`.
    pub fn leak(self) -> &'static Recorder {
        Box::leak(Box::new(self))
    }

    /// A run of fire `fire` of job `job` starts now.
    pub fn record(&self, job: usize, fire: DateTime<Utc>) {
        let late = late_us(fire);
        if fire.timestamp_subsec_nanos() != 0 {
            self.misaligned.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let d = fire
            .timestamp()
            .saturating_sub(self.window_start.load(Ordering::Acquire));
        if d >= 0 && d % self.step != 0 {
            self.misaligned.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match usize::try_from(d / self.step) {
            Ok(k) if d >= 0 && k < self.slots => {
                let slot = &self.lateness_us[job * self.slots + k];
                if slot
                    .compare_exchange(NOT_RUN, late, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    self.duplicated.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {
                self.outside.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Whether every slot has run.
    pub fn complete(&self) -> bool {
        self.lateness_us
            .iter()
            .all(|s| s.load(Ordering::Relaxed) != NOT_RUN)
    }

    /// The lateness of every slot that ran, sorted.
    pub fn sorted_lateness(&self) -> Vec<i64> {
        let mut samples: Vec<i64> = self
            .lateness_us
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .filter(|&l| l != NOT_RUN)
            .map(i64::from)
            .collect();
        samples.sort_unstable();
        samples
    }

    /// (slot, lateness in µs) of every slot that ran.
    pub fn ran(&self) -> Vec<(u32, i32)> {
        self.lateness_us
            .iter()
            .enumerate()
            .map(|(slot, l)| (slot, l.load(Ordering::Relaxed)))
            .filter(|&(_, l)| l != NOT_RUN)
            .map(|(slot, l)| (u32::try_from(slot).expect("fewer than 2^32 slots"), l))
            .collect()
    }
}

/// `Utc::now() - fire` in µs, clamped into an `i32` that is not [`NOT_RUN`].
pub fn late_us(fire: DateTime<Utc>) -> i32 {
    let late = (Utc::now() - fire)
        .num_microseconds()
        .unwrap_or(i64::MAX)
        .clamp(i64::from(NOT_RUN) + 1, i64::from(i32::MAX));
    i32::try_from(late).unwrap_or(i32::MAX)
}
