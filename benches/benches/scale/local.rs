//! `local`: N jobs every second with the `local` guard and an empty body, against a plain tokio
//! program with one `sleep_until` task per job; each side, N and round in a fresh process.
//!
//! *cronguard*: jobs built in code with `Job::new(..).run(..)`, started with
//! `builder().registered_jobs(false)`, stopped with `shutdown_within`. *baseline*: one tokio task
//! per job looping `sleep_until` the next epoch-aligned boundary computed from `SystemTime`. Both
//! record each run the same way ([`Recorder`]). The CPU window is `[W − 0.5 s, W + S − 0.5 s]` for
//! the first measured fire `W`: it holds exactly S bursts of fires. Runs of the window's last fires
//! may come up to `SCALE_SETTLE` seconds late before they count as missed.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{Job, JobContext, Schedule};
use serde::{Deserialize, Serialize};

use crate::measure::{self, at_second, percentile, sleep_until_wall, ChildSpec};
use crate::record::Recorder;
use crate::report::{header, median, ratio, row, thousands, Verdicts};
use crate::Config;

/// The N with the tighter CPU and memory targets: 10,000 local jobs due each second.
const ISSUE_N: usize = 10_000;

/// What one child of the `local` or the `idle` scenario measured.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct LocalResult {
    pub side: String,
    pub mode: String,
    pub n: usize,
    /// Build, register and start the N jobs.
    pub startup_us: u64,
    pub expected: u64,
    pub run: u64,
    pub missed: u64,
    pub duplicated: u64,
    /// Runs of fires outside the window (warm-up and after; idle: any run).
    pub outside: u64,
    pub misaligned: u64,
    /// Runs that started before their fire instant.
    pub early: u64,
    pub p50_us: i64,
    pub p99_us: i64,
    pub max_us: i64,
    pub cpu_per_10s: f64,
    pub rss_kib: u64,
    /// What cronguard reported in its status over the whole run (warm-up included).
    pub started: u64,
    pub skipped: u64,
    pub misfired: u64,
}

impl LocalResult {
    pub fn rss_mib(&self) -> f64 {
        self.rss_kib as f64 / 1024.0
    }

    /// The rounds of one side and N as one result: counts summed, figures the median.
    fn combine(rounds: &[&LocalResult]) -> LocalResult {
        let sum = |f: fn(&LocalResult) -> u64| rounds.iter().map(|r| f(r)).sum::<u64>();
        let med = |f: fn(&LocalResult) -> f64| median(rounds.iter().map(|r| f(r)).collect());
        let first = rounds[0];
        LocalResult {
            side: first.side.clone(),
            mode: first.mode.clone(),
            n: first.n,
            startup_us: med(|r| r.startup_us as f64) as u64,
            expected: sum(|r| r.expected),
            run: sum(|r| r.run),
            missed: sum(|r| r.missed),
            duplicated: sum(|r| r.duplicated),
            outside: sum(|r| r.outside),
            misaligned: sum(|r| r.misaligned),
            early: sum(|r| r.early),
            p50_us: med(|r| r.p50_us as f64) as i64,
            p99_us: med(|r| r.p99_us as f64) as i64,
            max_us: med(|r| r.max_us as f64) as i64,
            cpu_per_10s: med(|r| r.cpu_per_10s),
            rss_kib: med(|r| r.rss_kib as f64) as u64,
            started: sum(|r| r.started),
            skipped: sum(|r| r.skipped),
            misfired: sum(|r| r.misfired),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
    Baseline,
    Cronguard,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Baseline => "baseline",
            Side::Cronguard => "cronguard",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// Every job fires every second.
    Busy,
    /// Every job is on an hourly cron: nothing fires in the window.
    Idle,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Busy => "busy",
            Mode::Idle => "idle",
        }
    }
}

/// The next instant strictly after `now` on the epoch-aligned grid of `step` (as `every` does).
fn next_boundary(now: SystemTime, step: Duration) -> SystemTime {
    let since = now
        .duration_since(UNIX_EPOCH)
        .expect("the system clock is after 1970");
    let step_ns = step.as_nanos();
    let next = (since.as_nanos() / step_ns + 1) * step_ns;
    UNIX_EPOCH + Duration::from_nanos(u64::try_from(next).expect("a fire before 2554"))
}

/// The plain-tokio job: sleep until the wall clock reads the next boundary, run, repeat.
async fn baseline_job(job: usize, rec: &'static Recorder, step: Duration) {
    let mut fire = next_boundary(SystemTime::now(), step);
    loop {
        // A timer may wake a hair early against the wall clock: wait again, as cronguard does.
        while let Ok(wait) = fire.duration_since(SystemTime::now()) {
            if wait.is_zero() {
                break;
            }
            tokio::time::sleep_until(tokio::time::Instant::now() + wait).await;
        }
        rec.record(job, DateTime::<Utc>::from(fire));
        fire += step;
    }
}

enum Running {
    Baseline(Vec<tokio::task::JoinHandle<()>>),
    Cronguard(Box<cronguard::Cronguard>),
}

/// Builds, registers and starts `n` jobs.
async fn start(side: Side, mode: Mode, n: usize, rec: &'static Recorder) -> Running {
    match side {
        Side::Baseline => {
            let step = match mode {
                Mode::Busy => Duration::from_secs(1),
                Mode::Idle => Duration::from_secs(3600),
            };
            Running::Baseline(
                (0..n)
                    .map(|i| tokio::spawn(baseline_job(i, rec, step)))
                    .collect(),
            )
        }
        Side::Cronguard => {
            let mut builder = cronguard::builder()
                .registered_jobs(false)
                .shutdown_timeout(Duration::from_secs(5));
            for i in 0..n {
                let schedule = match mode {
                    Mode::Busy => Schedule::every(Duration::from_secs(1)),
                    Mode::Idle => Schedule::cron("0 0 * * * *", "UTC"),
                }
                .expect("a valid schedule");
                builder = builder.job(Job::new(format!("job{i}"), schedule).run(
                    move |ctx: JobContext| async move {
                        rec.record(i, ctx.fire_time());
                    },
                ));
            }
            Running::Cronguard(Box::new(builder.start().await.expect("cronguard starts")))
        }
    }
}

async fn stop(running: Running) {
    match running {
        Running::Baseline(tasks) => {
            for t in &tasks {
                t.abort();
            }
            for t in tasks {
                let _ = t.await;
            }
        }
        Running::Cronguard(handle) => (*handle).shutdown_within(Duration::from_secs(5)).await,
    }
}

/// The child of one side, mode and N: `SCALE_CHILD=<baseline|cronguard>:<busy|idle>:<n>`.
pub fn child(cfg: &Config, spec: &ChildSpec) {
    let side = match spec.side.as_str() {
        "baseline" => Side::Baseline,
        "cronguard" => Side::Cronguard,
        other => panic!("SCALE_CHILD: unknown side `{other}`"),
    };
    let mode = match spec.mode.as_str() {
        "busy" => Mode::Busy,
        _ => Mode::Idle,
    };
    let n = spec.n;
    let seconds = match mode {
        Mode::Busy => cfg.seconds,
        Mode::Idle => cfg.idle_seconds,
    };
    let slots_per_job = match mode {
        Mode::Busy => usize::try_from(seconds).expect("SCALE_SECONDS"),
        Mode::Idle => 0,
    };
    let rec = Recorder::new(n, slots_per_job, 1).leak();

    let rt = measure::runtime();
    let t0 = Instant::now();
    let running = rt.block_on(start(side, mode, n, rec));
    let startup = t0.elapsed();

    let warmup = i64::try_from(cfg.warmup).expect("SCALE_WARMUP");
    let secs = i64::try_from(seconds).expect("SCALE_SECONDS");
    let window_start = Utc::now().timestamp() + 1 + warmup;
    rec.window_start.store(window_start, Ordering::Release);
    // Busy: the window holds exactly `seconds` bursts of fires, each in its middle.
    let half = TimeDelta::milliseconds(match mode {
        Mode::Busy => 500,
        Mode::Idle => 0,
    });
    sleep_until_wall(at_second(window_start) - half);
    let (cpu0, wall0) = (measure::cpu_seconds(), Instant::now());
    sleep_until_wall(at_second(window_start + secs) - half);
    let (cpu1, wall) = (measure::cpu_seconds(), wall0.elapsed());
    if mode == Mode::Busy {
        // Late runs of the last fires may still come.
        sleep_until_wall(at_second(window_start + secs) + TimeDelta::milliseconds(200));
        measure::wait_until(Duration::from_secs(cfg.settle), || rec.complete());
    }
    // Before the status snapshot below, which allocates a copy of every job's status.
    let rss_kib = measure::peak_rss_kib();
    let reported = match &running {
        Running::Cronguard(handle) => {
            handle
                .monitor()
                .jobs()
                .iter()
                .fold([0u64; 3], |[s, k, m], j| {
                    [
                        s + j.counts.started,
                        k + j.counts.skipped,
                        m + j.counts.misfired,
                    ]
                })
        }
        Running::Baseline(_) => [0; 3],
    };
    rt.block_on(stop(running));

    let samples = rec.sorted_lateness();
    let expected = rec.lateness_us.len() as u64;
    let duplicated = rec.duplicated.load(Ordering::Relaxed);
    measure::emit(&LocalResult {
        side: side.name().to_owned(),
        mode: mode.name().to_owned(),
        n,
        startup_us: u64::try_from(startup.as_micros()).unwrap_or(u64::MAX),
        expected,
        run: samples.len() as u64 + duplicated,
        missed: expected - samples.len() as u64,
        duplicated,
        outside: rec.outside.load(Ordering::Relaxed),
        misaligned: rec.misaligned.load(Ordering::Relaxed),
        early: samples.iter().filter(|&&l| l < 0).count() as u64,
        p50_us: percentile(&samples, 0.50),
        p99_us: percentile(&samples, 0.99),
        max_us: samples.last().copied().unwrap_or(0),
        cpu_per_10s: (cpu1 - cpu0) * 10.0 / wall.as_secs_f64(),
        rss_kib,
        started: reported[0],
        skipped: reported[1],
        misfired: reported[2],
    });
}

/// Runs one child of the `local` or the `idle` scenario.
pub fn run_child(side: Side, mode: Mode, n: usize) -> Option<LocalResult> {
    measure::run(&ChildSpec::new(side.name(), mode.name(), n), &[])
}

/// The `local` scenario: every N, `SCALE_ROUNDS` rounds, then the tables.
pub fn run(cfg: &Config, v: &mut Verdicts) {
    let mut results = Vec::new();
    for &n in &cfg.ns {
        let mut rounds = Vec::new();
        for round in 0..cfg.rounds {
            // Alternate which side goes first, so that neither always runs on a warmer machine.
            let (b, c) = if round % 2 == 0 {
                let b = run_child(Side::Baseline, Mode::Busy, n);
                (b, run_child(Side::Cronguard, Mode::Busy, n))
            } else {
                let c = run_child(Side::Cronguard, Mode::Busy, n);
                (run_child(Side::Baseline, Mode::Busy, n), c)
            };
            rounds.push(b.zip(c));
        }
        results.push((n, rounds.into_iter().collect::<Option<Vec<_>>>()));
    }
    println!();
    println!(
        "Local: {} s measured after {} s warm-up, {} round(s) per N",
        cfg.seconds, cfg.warmup, cfg.rounds
    );
    println!("lateness = actual start - fire instant T; CPU = user + sys of the measured window, per 10 s; ratio = cronguard / baseline");
    for (n, rounds) in &results {
        match rounds {
            Some(rounds) => print_busy(*n, rounds, v),
            None => {
                println!(
                    "\nN = {}: a child process failed (see above)",
                    thousands(*n as u64)
                );
                v.failed(format!("N={}: the run failed", thousands(*n as u64)));
            }
        }
    }
}

/// The start-up row, with the < 1 s target at 100,000 jobs.
pub fn startup_row(n: usize, b: &LocalResult, c: &LocalResult, v: &mut Verdicts, target: String) {
    let ms = |r: &LocalResult| r.startup_us as f64 / 1000.0;
    row(
        "start-up (ms)",
        format!("{:.1}", ms(b)),
        format!("{:.1}", ms(c)),
        ratio(ms(c), ms(b)),
        if n >= 100_000 { "< 1000 ms" } else { "" },
        if n >= 100_000 {
            v.check(ms(c) < 1000.0, target)
        } else {
            ""
        },
    );
}

/// The peak RSS row: ≤ 2 × baseline + 20 MiB.
pub fn rss_row(n: usize, b: &LocalResult, c: &LocalResult, v: &mut Verdicts) {
    row(
        "peak RSS (MiB)",
        format!("{:.1}", b.rss_mib()),
        format!("{:.1}", c.rss_mib()),
        ratio(c.rss_mib(), b.rss_mib()),
        "<= 2x baseline + 20 MiB",
        v.check(
            c.rss_mib() <= 2.0 * b.rss_mib() + 20.0,
            format!(
                "N={}{}: peak RSS <= 2x baseline + 20 MiB",
                thousands(n as u64),
                if b.mode == "idle" { " idle" } else { "" }
            ),
        ),
    );
}

fn print_busy(n: usize, rounds: &[(LocalResult, LocalResult)], v: &mut Verdicts) {
    let b = &LocalResult::combine(&rounds.iter().map(|r| &r.0).collect::<Vec<_>>());
    let c = &LocalResult::combine(&rounds.iter().map(|r| &r.1).collect::<Vec<_>>());
    header(&format!(
        "N = {} jobs, every 1 s (local guard, empty body){}",
        thousands(n as u64),
        if rounds.len() > 1 {
            format!(": median of {} rounds, fire counts summed", rounds.len())
        } else {
            String::new()
        }
    ));
    let label = |what: &str| format!("N={}: {what}", thousands(n as u64));
    let ms = |us: i64| format!("{:.3}", us as f64 / 1000.0);
    startup_row(n, b, c, v, label("start-up < 1 s"));
    row(
        "fires run / expected",
        format!("{}/{}", thousands(b.run), thousands(b.expected)),
        format!("{}/{}", thousands(c.run), thousands(c.expected)),
        String::new(),
        "",
        "",
    );
    row(
        "duplicated",
        thousands(b.duplicated),
        thousands(c.duplicated),
        String::new(),
        "= 0",
        v.check(c.duplicated == 0, label("0 duplicated")),
    );
    row(
        "missed",
        thousands(b.missed),
        thousands(c.missed),
        String::new(),
        "= 0",
        v.check(c.missed == 0, label("0 missed")),
    );
    row(
        "lateness p50 (ms)",
        ms(b.p50_us),
        ms(c.p50_us),
        ratio(c.p50_us as f64, b.p50_us as f64),
        "",
        "",
    );
    let (target, verdict) = if n == 1 {
        let ok = c.p99_us as f64 <= 1.25 * b.p99_us as f64 + 1000.0;
        (
            "<= 1.25x baseline + 1 ms",
            v.check(ok, label("lateness p99 <= 1.25x baseline + 1 ms")),
        )
    } else if n >= 10_000 {
        let ok = c.p99_us as f64 <= 1.25 * b.p99_us as f64;
        (
            "<= 1.25x baseline",
            v.check(ok, label("lateness p99 <= 1.25x baseline")),
        )
    } else {
        ("(no target at this N)", "")
    };
    row(
        "lateness p99 (ms)",
        ms(b.p99_us),
        ms(c.p99_us),
        ratio(c.p99_us as f64, b.p99_us as f64),
        target,
        verdict,
    );
    row(
        "lateness max (ms)",
        ms(b.max_us),
        ms(c.max_us),
        ratio(c.max_us as f64, b.max_us as f64),
        "",
        "",
    );
    // At 10,000 jobs due each second, the tighter targets of the cluster-scale work.
    let cpu_most = if n == ISSUE_N { 1.5 } else { 2.0 };
    row(
        "CPU s per 10 s",
        format!("{:.3}", b.cpu_per_10s),
        format!("{:.3}", c.cpu_per_10s),
        ratio(c.cpu_per_10s, b.cpu_per_10s),
        &format!("<= {cpu_most}x baseline"),
        v.check(
            c.cpu_per_10s <= cpu_most * b.cpu_per_10s,
            label(&format!("CPU <= {cpu_most}x baseline")),
        ),
    );
    if n == ISSUE_N {
        row(
            "peak RSS (MiB)",
            format!("{:.1}", b.rss_mib()),
            format!("{:.1}", c.rss_mib()),
            ratio(c.rss_mib(), b.rss_mib()),
            "<= 1.5x baseline + 10 MiB",
            v.check(
                c.rss_mib() <= 1.5 * b.rss_mib() + 10.0,
                label("peak RSS <= 1.5x baseline + 10 MiB"),
            ),
        );
    } else {
        rss_row(n, b, c, v);
    }
    if rounds.len() > 1 {
        let per_round = |f: fn(&LocalResult) -> f64| {
            rounds
                .iter()
                .map(|(b, c)| ratio(f(c), f(b)).trim_end_matches('x').to_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "  ratio per round: lateness p99 {}",
            per_round(|r| r.p99_us as f64)
        );
        println!(
            "                   CPU           {}",
            per_round(|r| r.cpu_per_10s)
        );
    }
    if c.skipped + c.misfired > 0 {
        println!(
            "  note: cronguard reported {} runs started, {} fires skipped, {} misfired (whole run, warm-up included)",
            thousands(c.started),
            thousands(c.skipped),
            thousands(c.misfired)
        );
    }
    for o in [b, c] {
        if (o.misaligned, o.early) != (0, 0) {
            println!(
                "  note: {} ran {} fires off the 1 s grid and started {} runs before their T",
                o.side, o.misaligned, o.early
            );
        }
    }
}
