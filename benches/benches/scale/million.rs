//! `million`: a million `local` jobs in one process. Job `i` runs on the cron `<i % 60> * * * * *`
//! in UTC, so every job fires once a minute and 1/60 of them each second. Measured: the time to
//! build, register and start them, peak RSS, the CPU of a window of `SCALE_MILLION_SECONDS` (the
//! whole minute with `SCALE_MILLION=1`) and that every fire due in it ran once. Then as many jobs
//! on a cron that does not fire in the window (`0 0 0 1 1 *`): the CPU of waiting.
//!
//! Targets: start-up ≤ 2 s; peak RSS ≤ 400 MiB; 0 missed and 0 duplicated fires of the window;
//! idle CPU ≤ 1 % of a core.

use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{Job, JobContext, Schedule};
use serde::{Deserialize, Serialize};

use crate::measure::{self, at_second, percentile, sleep_until_wall, ChildSpec};
use crate::record::{late_us, NOT_RUN};
use crate::report::{ms, thousands, value_header, value_row, Verdicts};
use crate::Config;

const MIB: f64 = 1024.0;

/// What one child of the `million` scenario measured.
#[derive(Serialize, Deserialize, Debug)]
pub struct MillionResult {
    pub mode: String,
    pub n: usize,
    pub startup_us: u64,
    /// Seconds of the measured window.
    pub window_s: u64,
    /// Fires due in the window (one per job at most).
    pub expected: u64,
    pub run: u64,
    pub missed: u64,
    pub duplicated: u64,
    /// Runs of fires outside the window.
    pub outside: u64,
    pub p50_us: i64,
    pub p99_us: i64,
    pub max_us: i64,
    /// User + sys CPU seconds of the window.
    pub cpu_s: f64,
    /// Peak resident set size.
    pub rss_kib: u64,
    /// Resident set size once the jobs had started, and at the end of the window.
    pub started_rss_kib: u64,
    pub end_rss_kib: u64,
    pub skipped: u64,
    pub misfired: u64,
}

impl MillionResult {
    fn core_percent(&self) -> f64 {
        100.0 * self.cpu_s / self.window_s as f64
    }
}

/// One slot per job: the lateness of its run in the window (each job fires once a minute, and
/// the window is at most a minute long).
struct Slots {
    /// The first second of the window, fixed once the jobs have started; `i64::MAX` until then.
    window_start: AtomicI64,
    seconds: i64,
    late_us: Box<[AtomicI32]>,
    duplicated: AtomicU64,
    outside: AtomicU64,
}

impl Slots {
    fn record(&self, job: usize, fire: DateTime<Utc>) {
        let late = late_us(fire);
        let d = fire
            .timestamp()
            .saturating_sub(self.window_start.load(Ordering::Acquire));
        if !(0..self.seconds).contains(&d) {
            self.outside.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.late_us[job]
            .compare_exchange(NOT_RUN, late, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            self.duplicated.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether job `job` has a fire in the window.
    fn due(&self, job: usize) -> bool {
        let second = (job % 60) as i64;
        let start = self.window_start.load(Ordering::Acquire);
        (0..self.seconds).any(|k| (start + k).rem_euclid(60) == second)
    }

    fn missing(&self) -> u64 {
        self.late_us
            .iter()
            .enumerate()
            .filter(|(job, l)| l.load(Ordering::Relaxed) == NOT_RUN && self.due(*job))
            .count() as u64
    }
}

/// `SCALE_CHILD=cronguard:<million|million-idle>:<n>`.
pub fn child(cfg: &Config, spec: &ChildSpec) {
    let n = spec.n;
    let idle = spec.mode == "million-idle";
    let seconds = if idle {
        cfg.idle_seconds
    } else {
        cfg.million_seconds
    };
    let secs = i64::try_from(seconds).expect("SCALE_MILLION_SECONDS");
    let slots: &'static Slots = Box::leak(Box::new(Slots {
        window_start: AtomicI64::new(i64::MAX),
        seconds: secs,
        late_us: (0..n).map(|_| AtomicI32::new(NOT_RUN)).collect(),
        duplicated: AtomicU64::new(0),
        outside: AtomicU64::new(0),
    }));

    let rt = measure::runtime();
    let t0 = Instant::now();
    let handle = rt.block_on(async {
        let schedules: Vec<Schedule> = if idle {
            vec![Schedule::cron("0 0 0 1 1 *", "UTC").expect("a valid schedule")]
        } else {
            (0..60)
                .map(|s| Schedule::cron(&format!("{s} * * * * *"), "UTC").expect("a valid cron"))
                .collect()
        };
        let mut builder = cronguard::builder()
            .registered_jobs(false)
            .shutdown_timeout(Duration::from_secs(5));
        for i in 0..n {
            let schedule = schedules[i % schedules.len()].clone();
            builder = builder.job(Job::new(format!("job{i}"), schedule).run(
                move |ctx: JobContext| async move {
                    slots.record(i, ctx.fire_time());
                },
            ));
        }
        builder.start().await.expect("cronguard starts")
    });
    let startup = t0.elapsed();
    let started_rss_kib = measure::rss_kib();
    // The window begins after the warm-up, counted from the start; earlier fires are outside.
    let window_start =
        Utc::now().timestamp() + 1 + i64::try_from(cfg.warmup).expect("SCALE_WARMUP");
    slots.window_start.store(window_start, Ordering::Release);

    let half = TimeDelta::milliseconds(500);
    sleep_until_wall(at_second(window_start) - half);
    let (cpu0, wall0) = (measure::cpu_seconds(), Instant::now());
    sleep_until_wall(at_second(window_start + secs) - half);
    let (cpu1, wall) = (measure::cpu_seconds(), wall0.elapsed());
    if !idle {
        sleep_until_wall(at_second(window_start + secs) + TimeDelta::milliseconds(200));
        measure::wait_until(Duration::from_secs(cfg.settle), || slots.missing() == 0);
    }
    let rss_kib = measure::peak_rss_kib();
    let end_rss_kib = measure::rss_kib();
    let reported = handle.monitor().jobs().iter().fold([0u64; 2], |[k, m], j| {
        [k + j.counts.skipped, m + j.counts.misfired]
    });
    rt.block_on(handle.shutdown_within(Duration::from_secs(5)));

    let expected = (0..n).filter(|&j| slots.due(j)).count() as u64;
    let mut samples: Vec<i64> = slots
        .late_us
        .iter()
        .map(|l| l.load(Ordering::Relaxed))
        .filter(|&l| l != NOT_RUN)
        .map(i64::from)
        .collect();
    samples.sort_unstable();
    let duplicated = slots.duplicated.load(Ordering::Relaxed);
    measure::emit(&MillionResult {
        mode: spec.mode.clone(),
        n,
        startup_us: u64::try_from(startup.as_micros()).unwrap_or(u64::MAX),
        window_s: seconds,
        expected,
        run: samples.len() as u64 + duplicated,
        missed: slots.missing(),
        duplicated,
        outside: slots.outside.load(Ordering::Relaxed),
        p50_us: percentile(&samples, 0.50),
        p99_us: percentile(&samples, 0.99),
        max_us: samples.last().copied().unwrap_or(0),
        // Scaled to the window's nominal length.
        cpu_s: (cpu1 - cpu0) * seconds as f64 / wall.as_secs_f64(),
        rss_kib,
        started_rss_kib,
        end_rss_kib,
        skipped: reported[0],
        misfired: reported[1],
    });
}

pub fn run(cfg: &Config, v: &mut Verdicts) {
    let n = cfg.million_n;
    if n == 0 {
        return;
    }
    let busy: Option<MillionResult> = measure::run(&ChildSpec::new("cronguard", "million", n), &[]);
    let idle: Option<MillionResult> =
        measure::run(&ChildSpec::new("cronguard", "million-idle", n), &[]);
    println!();
    println!(
        "Million: N = {} local jobs in one process, job i on cron `<i % 60> * * * * *` UTC (1/60 of them each second), empty body;",
        thousands(n as u64)
    );
    println!(
        "  then N jobs on `0 0 0 1 1 *` (nothing fires in the window); start-up = build + register + start"
    );
    let label = |what: &str| format!("million N={}: {what}", thousands(n as u64));
    let Some(b) = busy else {
        println!("  a child process failed (see above)");
        v.failed(label("the run failed"));
        return;
    };
    value_header();
    value_row(
        "start-up (ms)",
        format!("{:.1}", b.startup_us as f64 / 1000.0),
        "<= 2000 ms",
        v.check(b.startup_us <= 2_000_000, label("start-up <= 2 s")),
    );
    value_row(
        "peak RSS (MiB)",
        format!("{:.1}", b.rss_kib as f64 / MIB),
        "<= 400 MiB",
        v.check(
            b.rss_kib as f64 / MIB <= 400.0,
            label("peak RSS <= 400 MiB"),
        ),
    );
    value_row(
        "RSS after start-up / at the end (MiB)",
        format!(
            "{:.1} / {:.1}",
            b.started_rss_kib as f64 / MIB,
            b.end_rss_kib as f64 / MIB
        ),
        "",
        "",
    );
    value_row(
        &format!("fires run / due in the {} s window", b.window_s),
        format!("{}/{}", thousands(b.run), thousands(b.expected)),
        "",
        "",
    );
    value_row(
        "duplicated",
        thousands(b.duplicated),
        "= 0",
        v.check(b.duplicated == 0, label("0 duplicated")),
    );
    value_row(
        "missed",
        thousands(b.missed),
        "= 0",
        v.check(b.missed == 0 && b.expected > 0, label("0 missed")),
    );
    value_row(
        "lateness p50 / p99 / max (ms)",
        format!("{} / {} / {}", ms(b.p50_us), ms(b.p99_us), ms(b.max_us)),
        "",
        "",
    );
    value_row(
        "CPU while firing (% of a core)",
        format!("{:.2}", b.core_percent()),
        &format!("{} fires/s", thousands((n / 60) as u64)),
        "",
    );
    if b.skipped + b.misfired > 0 {
        println!(
            "  note: cronguard reported {} fires skipped, {} misfired (whole run)",
            thousands(b.skipped),
            thousands(b.misfired)
        );
    }
    match idle {
        Some(i) => {
            value_row(
                "idle: start-up (ms)",
                format!("{:.1}", i.startup_us as f64 / 1000.0),
                "",
                "",
            );
            value_row(
                "idle: peak RSS (MiB)",
                format!("{:.1}", i.rss_kib as f64 / MIB),
                "",
                "",
            );
            value_row(
                &format!("idle: CPU over {} s (% of a core)", i.window_s),
                format!("{:.3}", i.core_percent()),
                "<= 1 %",
                v.check(i.core_percent() <= 1.0, label("idle CPU <= 1 % of a core")),
            );
        }
        None => {
            println!("  idle: a child process failed (see above)");
            v.failed(label("idle: the run failed"));
        }
    }
}
