//! Scale: cronguard against a plain-tokio baseline on the same load, in one run, side by side.
//!
//! ```sh
//! CARGO_TARGET_DIR=/work/target-bench cargo bench -p cronguard --bench scale
//! # a quick run:
//! SCALE_SECONDS=3 SCALE_NS=1,1000 SCALE_IDLE_N=1000 CARGO_TARGET_DIR=/work/target-bench \
//!     cargo bench -p cronguard --bench scale
//! ```
//!
//! **Load.** N jobs (`SCALE_NS`, default `1,1000,10000,100000`), each firing every second on the
//! epoch-aligned grid, `local` guard, empty body. After a warm-up (`SCALE_WARMUP`, default 2 s)
//! every fire instant `T` of a measured window of `SCALE_SECONDS` (default 10) whole seconds must
//! run exactly once per job. Then **idle**: `SCALE_IDLE_N` jobs (default 100,000; 0 skips it) on
//! the hourly cron `0 0 * * * *` in UTC, measured for `SCALE_IDLE_SECONDS` (default
//! `SCALE_SECONDS`) in which nothing fires.
//!
//! **Sides.** *cronguard*: jobs built in code with `Job::new(..).run(..)`, started with
//! `builder().registered_jobs(false)`, stopped with `shutdown_within`. *baseline*: one tokio task
//! per job looping `sleep_until` the next epoch-aligned boundary computed from `SystemTime`. Both
//! run on a multi-thread tokio runtime with 2 workers, and both record each run the same way:
//! `Utc::now() - T` at the start of the body, into a pre-allocated slot per (job, T) (a
//! compare-and-swap: a second run of a slot counts as duplicated, an empty slot as missed).
//!
//! **Measures.** Lateness (actual start − `T`) p50/p99/max; fires run, duplicated, missed; CPU
//! (user + sys from `getrusage`) of the measured window only, scaled to 10 s; peak RSS (`VmHWM`,
//! read after the window, before shutdown); the time to build, register and start the N jobs
//! (for cronguard: `Job::new` + `Builder::job` + `start()`; for the baseline: `tokio::spawn`).
//! Each side and N runs in a fresh child process of this same binary (re-executed with
//! `SCALE_CHILD=<side>:<mode>:<n>`) so that CPU and RSS are its own. Each N runs
//! `SCALE_ROUNDS` rounds (default 3; the sides alternate which goes first), and the table shows
//! the median of the rounds (fire counts summed) with the ratios of every round under it: on a
//! shared 2-core machine one round's p99 varies by ±30 % on either side. The CPU window is
//! `[W − 0.5 s, W + S − 0.5 s]` for the first measured fire `W`: it holds exactly S bursts of
//! fires. Runs of the window's last fires may come up to `SCALE_SETTLE` (default 10) seconds late
//! before they count as missed. When cronguard reports skipped or misfired fires (its own status
//! counts, warm-up included), a note under its table says so.
//!
//! **Targets** (PASS/FAIL printed next to each): 0 missed and 0 duplicated fires at every N;
//! lateness p99 ≤ 1.25 × baseline p99 at N = 1 (+1 ms allowance) and N ≥ 10,000; CPU per 10 s ≤
//! 2 × baseline; peak RSS ≤ 2 × baseline + 20 MiB; idle CPU of 100,000 idle jobs ≤ 1 % of one
//! core; start-up of 100,000 jobs < 1 s.
//!
//! **Redis** (after the local sections; `SCALE_REDIS_N` jobs, default 1,000, 0 skips it; skipped
//! with a note when `redis-server` is not installed): the same every-second load with
//! `lock = redis` (lease 30 s) in three scheduler processes (`SCALE_CHILD=cronguard:redis:<n>`)
//! against one `redis-server` the parent starts (`SCALE_REDIS_URL`; the parent also fixes the
//! window for all three in `SCALE_REDIS_WINDOW`). Each child reports the (job, T) it ran; the parent
//! merges them and counts missed and duplicated fires across the processes. Also printed: lateness
//! over all runs, claims per second, claim latency (the `cronguard_claim_latency_seconds`
//! histogram, read with a debugging recorder) and T → claim outcome (from the events), and Redis
//! round trips (`cmdstat_evalsha` + `cmdstat_eval` of `INFO commandstats` over the window) per
//! fire and per run of the claiming process. Targets: 0 missed, 0 duplicated, 2 round trips per run.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{Job, JobContext, Schedule};
use nix::sys::resource::{getrusage, UsageWho};

/// A slot whose fire has not run.
const NOT_RUN: i32 = i32::MIN;
const MIB: f64 = 1024.0 * 1024.0;

/// Settings from the environment.
struct Config {
    ns: Vec<usize>,
    seconds: u64,
    warmup: u64,
    idle_n: usize,
    idle_seconds: u64,
    /// How long after the window stragglers may still run before their fires count as missed.
    settle: u64,
    /// Jobs of the Redis scenario (`SCALE_REDIS_N`, default 1,000; 0 skips it).
    redis_n: usize,
    /// Rounds per N (`SCALE_ROUNDS`, default 3): baseline and cronguard alternate, and the table
    /// shows the median of the rounds, so one noisy second of a shared machine does not decide.
    rounds: usize,
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, not `{v}`")),
        Err(_) => default,
    }
}

impl Config {
    fn from_env() -> Self {
        let ns = match std::env::var("SCALE_NS") {
            Ok(v) => v
                .split(',')
                .map(|n| {
                    n.trim()
                        .replace('_', "")
                        .parse::<usize>()
                        .unwrap_or_else(|_| panic!("SCALE_NS: `{n}` is not a job count"))
                })
                .collect(),
            Err(_) => vec![1, 1_000, 10_000, 100_000],
        };
        let seconds = env_u64("SCALE_SECONDS", 10).max(1);
        Config {
            ns,
            seconds,
            warmup: env_u64("SCALE_WARMUP", 2),
            idle_n: usize::try_from(env_u64("SCALE_IDLE_N", 100_000)).expect("SCALE_IDLE_N"),
            idle_seconds: env_u64("SCALE_IDLE_SECONDS", seconds).max(1),
            settle: env_u64("SCALE_SETTLE", 10),
            redis_n: usize::try_from(env_u64("SCALE_REDIS_N", 1_000)).expect("SCALE_REDIS_N"),
            rounds: usize::try_from(env_u64("SCALE_ROUNDS", 3).max(1)).expect("SCALE_ROUNDS"),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Baseline,
    Cronguard,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Every job fires every second.
    Busy,
    /// Every job is on an hourly cron: nothing fires in the window.
    Idle,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Baseline => "baseline",
            Side::Cronguard => "cronguard",
        }
    }
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Busy => "busy",
            Mode::Idle => "idle",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Recording (identical on both sides)
// ---------------------------------------------------------------------------------------------

/// One slot per (job, measured second): the lateness in µs of the first run of that fire.
struct Recorder {
    seconds: usize,
    /// The first measured fire instant (whole seconds since the epoch); `i64::MAX` until known.
    window_start: AtomicI64,
    lateness_us: Box<[AtomicI32]>,
    duplicated: AtomicU64,
    /// Runs whose `T` lies outside the window (warm-up and after).
    outside: AtomicU64,
    /// Runs whose `T` is not a whole second.
    misaligned: AtomicU64,
}

impl Recorder {
    fn new(jobs: usize, seconds: usize) -> Self {
        Recorder {
            seconds,
            window_start: AtomicI64::new(i64::MAX),
            lateness_us: (0..jobs * seconds)
                .map(|_| AtomicI32::new(NOT_RUN))
                .collect(),
            duplicated: AtomicU64::new(0),
            outside: AtomicU64::new(0),
            misaligned: AtomicU64::new(0),
        }
    }

    /// A run of fire `fire` of job `job` starts now.
    fn record(&self, job: usize, fire: DateTime<Utc>) {
        let late = (Utc::now() - fire)
            .num_microseconds()
            .unwrap_or(i64::MAX)
            .clamp(i64::from(NOT_RUN) + 1, i64::from(i32::MAX));
        if fire.timestamp_subsec_nanos() != 0 {
            self.misaligned.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let k = fire
            .timestamp()
            .saturating_sub(self.window_start.load(Ordering::Acquire));
        match usize::try_from(k) {
            Ok(k) if k < self.seconds => {
                let slot = &self.lateness_us[job * self.seconds + k];
                // `late` fits an i32 after the clamp above.
                let late = i32::try_from(late).unwrap_or(i32::MAX);
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

    fn complete(&self) -> bool {
        self.lateness_us
            .iter()
            .all(|s| s.load(Ordering::Relaxed) != NOT_RUN)
    }
}

// ---------------------------------------------------------------------------------------------
// The two sides
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// The child: one side, one mode, one N
// ---------------------------------------------------------------------------------------------

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let u = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    secs(u.user_time()) + secs(u.system_time())
}

/// Peak resident set size in KiB (`VmHWM` of /proc/self/status).
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

fn sleep_until_wall(t: DateTime<Utc>) {
    if let Ok(wait) = (t - Utc::now()).to_std() {
        std::thread::sleep(wait);
    }
}

fn at_second(s: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(s, 0).expect("a time in range")
}

fn percentile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn child(spec: &str) {
    let cfg = Config::from_env();
    let mut parts = spec.split(':');
    let side = match parts.next() {
        Some("baseline") => Side::Baseline,
        Some("cronguard") => Side::Cronguard,
        _ => panic!("SCALE_CHILD `{spec}`: unknown side"),
    };
    let mode = match parts.next() {
        Some("busy") => Mode::Busy,
        Some("idle") => Mode::Idle,
        _ => panic!("SCALE_CHILD `{spec}`: unknown mode"),
    };
    let n: usize = parts
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("SCALE_CHILD `{spec}`: no job count"));
    let seconds = match mode {
        Mode::Busy => cfg.seconds,
        Mode::Idle => cfg.idle_seconds,
    };
    let slots_per_job = match mode {
        Mode::Busy => usize::try_from(seconds).expect("SCALE_SECONDS"),
        Mode::Idle => 0,
    };
    let rec: &'static Recorder = Box::leak(Box::new(Recorder::new(n, slots_per_job)));

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let t0 = Instant::now();
    let running = rt.block_on(start(side, mode, n, rec));
    let startup = t0.elapsed();

    let warmup = i64::try_from(cfg.warmup).expect("SCALE_WARMUP");
    let secs = i64::try_from(seconds).expect("SCALE_SECONDS");
    let next_whole = Utc::now().timestamp() + 1;
    let window_start = next_whole + warmup;
    rec.window_start.store(window_start, Ordering::Release);
    // Busy: the window holds exactly `seconds` bursts of fires, each in its middle.
    let half = TimeDelta::milliseconds(match mode {
        Mode::Busy => 500,
        Mode::Idle => 0,
    });
    let (from, to) = (
        at_second(window_start) - half,
        at_second(window_start + secs) - half,
    );
    sleep_until_wall(from);
    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    sleep_until_wall(to);
    let (cpu1, wall) = (cpu_seconds(), wall0.elapsed());
    if mode == Mode::Busy {
        // Late runs of the last fires may still come.
        let give_up = Instant::now() + Duration::from_secs(cfg.settle);
        sleep_until_wall(at_second(window_start + secs) + TimeDelta::milliseconds(200));
        while !rec.complete() && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // Before the status snapshot below, which allocates a copy of every job's status.
    let rss_kib = peak_rss_kib();
    // What cronguard itself reported, over the whole run (warm-up included).
    let reported = match &running {
        Running::Cronguard(handle) => handle.jobs().iter().fold([0u64; 3], |[s, k, m], j| {
            [
                s + j.counts.started,
                k + j.counts.skipped,
                m + j.counts.misfired,
            ]
        }),
        Running::Baseline(_) => [0; 3],
    };
    rt.block_on(stop(running));

    let mut samples: Vec<i64> = rec
        .lateness_us
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .filter(|&l| l != NOT_RUN)
        .map(i64::from)
        .collect();
    samples.sort_unstable();
    let expected = rec.lateness_us.len();
    let cpu_per_10s = (cpu1 - cpu0) * 10.0 / wall.as_secs_f64();
    println!(
        "SCALE_RESULT side={} mode={} n={n} startup_us={} expected={expected} run={} missed={} duplicated={} outside={} misaligned={} early={} p50_us={} p99_us={} max_us={} cpu_per_10s={cpu_per_10s:.6} rss_kib={rss_kib} started={} skipped={} misfired={}",
        side.name(),
        mode.name(),
        startup.as_micros(),
        samples.len() as u64 + rec.duplicated.load(Ordering::Relaxed),
        expected - samples.len(),
        rec.duplicated.load(Ordering::Relaxed),
        rec.outside.load(Ordering::Relaxed),
        rec.misaligned.load(Ordering::Relaxed),
        samples.iter().filter(|&&l| l < 0).count(),
        percentile(&samples, 0.50),
        percentile(&samples, 0.99),
        samples.last().copied().unwrap_or(0),
        reported[0],
        reported[1],
        reported[2],
    );
}

// ---------------------------------------------------------------------------------------------
// The parent: runs every child, prints the table
// ---------------------------------------------------------------------------------------------

/// What a child reported.
struct Outcome(HashMap<String, String>);

impl Outcome {
    fn u(&self, key: &str) -> u64 {
        self.0.get(key).and_then(|v| v.parse().ok()).unwrap_or(0)
    }
    fn f(&self, key: &str) -> f64 {
        self.0.get(key).and_then(|v| v.parse().ok()).unwrap_or(0.0)
    }
    fn ms(&self, key: &str) -> f64 {
        self.f(key) / 1000.0
    }
    fn rss_mib(&self) -> f64 {
        self.f("rss_kib") * 1024.0 / MIB
    }
}

fn run_child(side: Side, mode: Mode, n: usize) -> Option<Outcome> {
    let spec = format!("{}:{}:{n}", side.name(), mode.name());
    eprintln!("scale: running {spec} ...");
    let exe = std::env::current_exe().expect("the path of this benchmark");
    let out = Command::new(exe)
        .env("SCALE_CHILD", &spec)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("the benchmark can start itself");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix("SCALE_RESULT "));
    match line {
        Some(line) if out.status.success() => Some(Outcome(
            line.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        )),
        _ => {
            eprintln!("scale: child {spec} failed ({}): {stdout}", out.status);
            None
        }
    }
}

/// Counts that add up over rounds; every other figure is the median of the rounds.
const SUMMED: [&str; 10] = [
    "expected",
    "run",
    "missed",
    "duplicated",
    "outside",
    "misaligned",
    "early",
    "started",
    "skipped",
    "misfired",
];

/// The rounds of one side and N as one outcome: counts summed, figures the median.
fn combine(rounds: &[Outcome]) -> Outcome {
    let mut out = HashMap::new();
    let Some(first) = rounds.first() else {
        return Outcome(out);
    };
    for (key, value) in &first.0 {
        let combined = if SUMMED.contains(&key.as_str()) {
            rounds.iter().map(|o| o.u(key)).sum::<u64>().to_string()
        } else if value.parse::<f64>().is_ok() {
            let mut all: Vec<f64> = rounds.iter().map(|o| o.f(key)).collect();
            all.sort_by(f64::total_cmp);
            let mid = all.len() / 2;
            let median = if all.len() % 2 == 1 {
                all[mid]
            } else {
                (all[mid - 1] + all[mid]) / 2.0
            };
            median.to_string()
        } else {
            value.clone()
        };
        out.insert(key.clone(), combined);
    }
    Outcome(out)
}

/// `12,345`.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ratio(c: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", c / b)
    } else if c == 0.0 {
        "1.00x".to_owned()
    } else {
        "inf".to_owned()
    }
}

#[derive(Default)]
struct Verdicts {
    passed: usize,
    failed: Vec<String>,
}

impl Verdicts {
    fn check(&mut self, ok: bool, what: String) -> &'static str {
        if ok {
            self.passed += 1;
            "PASS"
        } else {
            self.failed.push(what);
            "FAIL"
        }
    }
}

/// One table row: metric, baseline, cronguard, ratio, target, verdict.
fn row(metric: &str, b: String, c: String, ratio: String, target: &str, verdict: &str) {
    println!("  {metric:<22} {b:>19} {c:>19} {ratio:>8}  {target:<26} {verdict}");
}

fn header(title: &str) {
    println!();
    println!("{title}");
    row(
        "",
        "baseline".into(),
        "cronguard".into(),
        "ratio".into(),
        "target",
        "",
    );
}

/// The start-up row, with the < 1 s target at 100,000 jobs.
fn startup_row(n: usize, b: &Outcome, c: &Outcome, v: &mut Verdicts, target: String) {
    row(
        "start-up (ms)",
        format!("{:.1}", b.ms("startup_us")),
        format!("{:.1}", c.ms("startup_us")),
        ratio(c.f("startup_us"), b.f("startup_us")),
        if n >= 100_000 { "< 1000 ms" } else { "" },
        if n >= 100_000 {
            v.check(c.ms("startup_us") < 1000.0, target)
        } else {
            ""
        },
    );
}

fn print_busy(n: usize, rounds: &[(Outcome, Outcome)], v: &mut Verdicts) {
    let b = &combine(
        &rounds
            .iter()
            .map(|r| Outcome(r.0 .0.clone()))
            .collect::<Vec<_>>(),
    );
    let c = &combine(
        &rounds
            .iter()
            .map(|r| Outcome(r.1 .0.clone()))
            .collect::<Vec<_>>(),
    );
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
    startup_row(n, b, c, v, label("start-up < 1 s"));
    row(
        "fires run / expected",
        format!("{}/{}", thousands(b.u("run")), thousands(b.u("expected"))),
        format!("{}/{}", thousands(c.u("run")), thousands(c.u("expected"))),
        String::new(),
        "",
        "",
    );
    row(
        "duplicated",
        thousands(b.u("duplicated")),
        thousands(c.u("duplicated")),
        String::new(),
        "= 0",
        v.check(c.u("duplicated") == 0, label("0 duplicated")),
    );
    row(
        "missed",
        thousands(b.u("missed")),
        thousands(c.u("missed")),
        String::new(),
        "= 0",
        v.check(c.u("missed") == 0, label("0 missed")),
    );
    row(
        "lateness p50 (ms)",
        format!("{:.3}", b.ms("p50_us")),
        format!("{:.3}", c.ms("p50_us")),
        ratio(c.f("p50_us"), b.f("p50_us")),
        "",
        "",
    );
    let (target, verdict) = if n == 1 {
        let ok = c.ms("p99_us") <= 1.25 * b.ms("p99_us") + 1.0;
        (
            "<= 1.25x baseline + 1 ms",
            v.check(ok, label("lateness p99 <= 1.25x baseline + 1 ms")),
        )
    } else if n >= 10_000 {
        let ok = c.f("p99_us") <= 1.25 * b.f("p99_us");
        (
            "<= 1.25x baseline",
            v.check(ok, label("lateness p99 <= 1.25x baseline")),
        )
    } else {
        ("(no target at this N)", "")
    };
    row(
        "lateness p99 (ms)",
        format!("{:.3}", b.ms("p99_us")),
        format!("{:.3}", c.ms("p99_us")),
        ratio(c.f("p99_us"), b.f("p99_us")),
        target,
        verdict,
    );
    row(
        "lateness max (ms)",
        format!("{:.3}", b.ms("max_us")),
        format!("{:.3}", c.ms("max_us")),
        ratio(c.f("max_us"), b.f("max_us")),
        "",
        "",
    );
    row(
        "CPU s per 10 s",
        format!("{:.3}", b.f("cpu_per_10s")),
        format!("{:.3}", c.f("cpu_per_10s")),
        ratio(c.f("cpu_per_10s"), b.f("cpu_per_10s")),
        "<= 2x baseline",
        v.check(
            c.f("cpu_per_10s") <= 2.0 * b.f("cpu_per_10s"),
            label("CPU <= 2x baseline"),
        ),
    );
    print_rss(n, b, c, v);
    if rounds.len() > 1 {
        let per_round = |key: &str| {
            joined(
                rounds
                    .iter()
                    .map(|(b, c)| ratio(c.f(key), b.f(key)).trim_end_matches('x').to_owned()),
            )
        };
        println!("  ratio per round: lateness p99 {}", per_round("p99_us"));
        println!(
            "                   CPU           {}",
            per_round("cpu_per_10s")
        );
    }
    if c.u("skipped") + c.u("misfired") > 0 {
        println!(
            "  note: cronguard reported {} runs started, {} fires skipped, {} misfired (whole run, warm-up included)",
            thousands(c.u("started")),
            thousands(c.u("skipped")),
            thousands(c.u("misfired"))
        );
    }
    for o in [b, c] {
        let odd = (o.u("misaligned"), o.u("early"));
        if odd != (0, 0) {
            println!(
                "  note: {} ran {} fires off the 1 s grid and started {} runs before their T",
                o.0.get("side").map_or("?", String::as_str),
                odd.0,
                odd.1
            );
        }
    }
}

fn print_rss(n: usize, b: &Outcome, c: &Outcome, v: &mut Verdicts) {
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
                if b.0.get("mode").is_some_and(|m| m == "idle") {
                    " idle"
                } else {
                    ""
                }
            ),
        ),
    );
}

fn print_idle(n: usize, seconds: u64, b: &Outcome, c: &Outcome, v: &mut Verdicts) {
    header(&format!(
        "Idle: N = {} jobs on cron `0 0 * * * *` UTC (nothing fires in the {seconds} s window)",
        thousands(n as u64)
    ));
    let label = |what: &str| format!("idle N={}: {what}", thousands(n as u64));
    startup_row(n, b, c, v, label("start-up < 1 s"));
    row(
        "fires run (expect 0)",
        thousands(b.u("outside")),
        thousands(c.u("outside")),
        String::new(),
        "",
        "",
    );
    let target = if n >= 100_000 {
        "<= 0.100 (1 % of a core)"
    } else {
        ""
    };
    row(
        "CPU s per 10 s",
        format!("{:.3}", b.f("cpu_per_10s")),
        format!("{:.3}", c.f("cpu_per_10s")),
        ratio(c.f("cpu_per_10s"), b.f("cpu_per_10s")),
        target,
        if n >= 100_000 {
            v.check(c.f("cpu_per_10s") <= 0.1, label("CPU <= 1 % of one core"))
        } else {
            ""
        },
    );
    print_rss(n, b, c, v);
}

fn parent() {
    let cfg = Config::from_env();
    let mut v = Verdicts::default();
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
    let idle = (cfg.idle_n > 0).then(|| {
        (
            run_child(Side::Baseline, Mode::Idle, cfg.idle_n),
            run_child(Side::Cronguard, Mode::Idle, cfg.idle_n),
        )
    });

    println!();
    println!(
        "cronguard scale benchmark: {} s measured after {} s warm-up, {} round(s) per N; tokio multi-thread, 2 workers; each side, N and round in a fresh process",
        cfg.seconds, cfg.warmup, cfg.rounds
    );
    println!("lateness = actual start - fire instant T; CPU = user + sys of the measured window, per 10 s; ratio = cronguard / baseline");
    for (n, rounds) in &results {
        match rounds {
            Some(rounds) => print_busy(*n, rounds, &mut v),
            None => {
                println!(
                    "\nN = {}: a child process failed (see above)",
                    thousands(*n as u64)
                );
                v.failed
                    .push(format!("N={}: the run failed", thousands(*n as u64)));
            }
        }
    }
    match idle {
        Some((Some(b), Some(c))) => print_idle(cfg.idle_n, cfg.idle_seconds, &b, &c, &mut v),
        Some(_) => {
            println!("\nIdle: a child process failed (see above)");
            v.failed.push("idle: the run failed".to_owned());
        }
        None => {}
    }
    if cfg.redis_n > 0 {
        redis_scenario(&cfg, &mut v);
    }
    println!();
    println!("targets: {} passed, {} failed", v.passed, v.failed.len());
    for f in &v.failed {
        println!("  FAIL {f}");
    }
}

// ---------------------------------------------------------------------------------------------
// Redis: three schedulers in three processes against one redis-server
// ---------------------------------------------------------------------------------------------

/// How many scheduler processes share the Redis guard.
const REDIS_PROCESSES: usize = 3;

/// What one process saw of the fires of the window, from its events.
#[derive(Default)]
struct Outcomes {
    /// Claims it won (`started`).
    won: u64,
    /// Claims that found the fire already run (`claimed_elsewhere`).
    elsewhere: u64,
    /// Claims that found the lock held (`skipped`, `overlap = "skip"`).
    busy: u64,
    misfired: u64,
    /// From `T` to the claim's outcome event, in µs, one per fire of the window.
    outcome_us: Vec<i64>,
}

impl Outcomes {
    fn total(&self) -> u64 {
        self.won + self.elsewhere + self.busy + self.misfired
    }
}

/// Values in µs of every `cronguard_claim_latency_seconds` sample since the last snapshot.
fn claim_latencies_us(snapshotter: &metrics_util::debugging::Snapshotter) -> Vec<i64> {
    let mut out = Vec::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if key.key().name() != "cronguard_claim_latency_seconds" {
            continue;
        }
        if let metrics_util::debugging::DebugValue::Histogram(values) = value {
            out.extend(values.iter().map(|v| (v.into_inner() * 1e6).round() as i64));
        }
    }
    out
}

fn joined(values: impl Iterator<Item = String>) -> String {
    values.collect::<Vec<_>>().join(" ")
}

/// One of the three scheduler processes: `SCALE_CHILD=cronguard:redis:<n>`, with the server's
/// URL in `SCALE_REDIS_URL`, the first measured fire in `SCALE_REDIS_WINDOW` (set by the parent,
/// the same for all three) and this process's number in `SCALE_REDIS_INSTANCE`.
fn redis_child(spec: &str) {
    let cfg = Config::from_env();
    let n: usize = spec
        .rsplit(':')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("SCALE_CHILD `{spec}`: no job count"));
    let url = std::env::var("SCALE_REDIS_URL").expect("SCALE_REDIS_URL");
    let window_start: i64 = std::env::var("SCALE_REDIS_WINDOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("SCALE_REDIS_WINDOW");
    let instance = std::env::var("SCALE_REDIS_INSTANCE").unwrap_or_else(|_| "0".to_owned());
    let secs = i64::try_from(cfg.seconds).expect("SCALE_SECONDS");
    let slots_per_job = usize::try_from(cfg.seconds).expect("SCALE_SECONDS");
    let rec: &'static Recorder = Box::leak(Box::new(Recorder::new(n, slots_per_job)));
    rec.window_start.store(window_start, Ordering::Release);

    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().expect("the only metrics recorder");

    let outcomes: &'static std::sync::Mutex<Outcomes> =
        Box::leak(Box::new(std::sync::Mutex::new(Outcomes::default())));
    let in_window =
        move |t: DateTime<Utc>| (window_start..window_start + secs).contains(&t.timestamp());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let t0 = Instant::now();
    let handle = rt.block_on(async {
        let mut builder = cronguard::builder()
            .registered_jobs(false)
            .redis_url(url)
            .instance(format!("scale-{instance}"))
            .shutdown_timeout(Duration::from_secs(5))
            .on_event(move |e: &cronguard::Event| {
                if !in_window(e.fire_time) {
                    return;
                }
                let mut o = outcomes.lock().expect("not poisoned");
                match e.kind {
                    cronguard::EventKind::Started => o.won += 1,
                    cronguard::EventKind::ClaimedElsewhere => o.elsewhere += 1,
                    cronguard::EventKind::Skipped { .. } => o.busy += 1,
                    cronguard::EventKind::Misfired { .. } => o.misfired += 1,
                    _ => return,
                }
                let us = (e.at - e.fire_time).num_microseconds().unwrap_or(i64::MAX);
                o.outcome_us.push(us);
            });
        for i in 0..n {
            let schedule = Schedule::every(Duration::from_secs(1)).expect("a valid schedule");
            builder = builder.job(
                Job::new(format!("job{i}"), schedule)
                    .lock(cronguard::Lock::Redis)
                    .lease(Duration::from_secs(30))
                    .run(move |ctx: JobContext| async move {
                        rec.record(i, ctx.fire_time());
                    }),
            );
        }
        builder.start().await.expect("cronguard starts")
    });
    let startup = t0.elapsed();

    // The same window as the parent's `INFO commandstats` samples: S bursts of claims.
    let half = TimeDelta::milliseconds(500);
    sleep_until_wall(at_second(window_start) - half);
    let warmup_claims = claim_latencies_us(&snapshotter).len();
    sleep_until_wall(at_second(window_start + secs) - half);
    let mut claim_us = claim_latencies_us(&snapshotter);
    // Wait for an outcome of every fire of the window in this process.
    let expected = (n as u64) * cfg.seconds;
    let give_up = Instant::now() + Duration::from_secs(cfg.settle);
    sleep_until_wall(at_second(window_start + secs) + TimeDelta::milliseconds(200));
    while outcomes.lock().expect("not poisoned").total() < expected && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(200));
    }
    // Hooks have seen every event once shutdown returns.
    rt.block_on(handle.shutdown_within(Duration::from_secs(5)));
    claim_us.sort_unstable();

    let o = outcomes.lock().expect("not poisoned");
    println!(
        "SCALE_RESULT side=cronguard mode=redis n={n} startup_us={} duplicated={} outside={} won={} elsewhere={} busy={} misfired={} claims={} warmup_claims={warmup_claims}",
        startup.as_micros(),
        rec.duplicated.load(Ordering::Relaxed),
        rec.outside.load(Ordering::Relaxed),
        o.won,
        o.elsewhere,
        o.busy,
        o.misfired,
        claim_us.len(),
    );
    println!(
        "SCALE_CLAIM_US {}",
        joined(claim_us.iter().map(i64::to_string))
    );
    println!(
        "SCALE_OUTCOME_US {}",
        joined(o.outcome_us.iter().map(i64::to_string))
    );
    println!(
        "SCALE_RAN {}",
        joined(
            rec.lateness_us
                .iter()
                .enumerate()
                .map(|(slot, l)| (slot, l.load(Ordering::Relaxed)))
                .filter(|&(_, l)| l != NOT_RUN)
                .map(|(slot, l)| format!("{slot}:{l}"))
        )
    );
}

/// `cmdstat_evalsha` + `cmdstat_eval` calls so far.
fn script_calls(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            let calls: u64 = rest.split(',').next()?.parse().ok()?;
            matches!(name, "evalsha" | "eval").then_some(calls)
        })
        .sum()
}

/// What one Redis child printed.
struct RedisOutcome {
    fields: Outcome,
    claim_us: Vec<i64>,
    outcome_us: Vec<i64>,
    /// (slot, lateness in µs) of every fire of the window this process ran.
    ran: Vec<(usize, i64)>,
}

fn parse_redis_child(stdout: &str) -> Option<RedisOutcome> {
    let line = |prefix: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(str::to_owned)
    };
    let numbers = |l: String| -> Vec<i64> {
        l.split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect()
    };
    Some(RedisOutcome {
        fields: Outcome(
            line("SCALE_RESULT ")?
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        ),
        claim_us: numbers(line("SCALE_CLAIM_US")?),
        outcome_us: numbers(line("SCALE_OUTCOME_US")?),
        ran: line("SCALE_RAN")?
            .split_whitespace()
            .filter_map(|kv| {
                let (slot, l) = kv.split_once(':')?;
                Some((slot.parse().ok()?, l.parse().ok()?))
            })
            .collect(),
    })
}

/// One row of the Redis table: metric, value, expected, verdict.
fn redis_row(metric: &str, value: String, target: &str, verdict: &str) {
    println!("  {metric:<42} {value:>22}  {target:<28} {verdict}");
}

fn redis_scenario(cfg: &Config, v: &mut Verdicts) {
    let n = cfg.redis_n;
    let title = format!(
        "Redis: N = {} jobs, every 1 s (redis guard, lease 30 s, empty body), {REDIS_PROCESSES} scheduler processes, one redis-server",
        thousands(n as u64)
    );
    let Some(server) = cronguard_testkit::RedisServer::start() else {
        println!("\n{title}\n  skipped: redis-server is not installed");
        return;
    };
    let url = server.url();
    eprintln!("scale: running cronguard:redis:{n} x {REDIS_PROCESSES} against {url} ...");
    let secs = i64::try_from(cfg.seconds).expect("SCALE_SECONDS");
    let warmup = i64::try_from(cfg.warmup).expect("SCALE_WARMUP");
    // Two more seconds for three processes to start and connect.
    let window_start = Utc::now().timestamp() + 1 + warmup + 2;
    let exe = std::env::current_exe().expect("the path of this benchmark");
    let children: Vec<_> = (0..REDIS_PROCESSES)
        .map(|i| {
            Command::new(&exe)
                .env("SCALE_CHILD", format!("cronguard:redis:{n}"))
                .env("SCALE_REDIS_URL", &url)
                .env("SCALE_REDIS_WINDOW", window_start.to_string())
                .env("SCALE_REDIS_INSTANCE", i.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("the benchmark can start itself")
        })
        .collect();

    let mut conn = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .expect("the parent connects to redis-server");
    let half = TimeDelta::milliseconds(500);
    sleep_until_wall(at_second(window_start) - half);
    let calls0 = script_calls(&mut conn);
    sleep_until_wall(at_second(window_start + secs) - half);
    let calls = script_calls(&mut conn) - calls0;

    let mut outs = Vec::new();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("the child runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        match parse_redis_child(&stdout) {
            Some(o) if out.status.success() => outs.push(o),
            _ => eprintln!(
                "scale: redis child {i} failed ({}): {}",
                out.status,
                stdout.lines().take(3).collect::<Vec<_>>().join("\n")
            ),
        }
    }
    drop(server);
    println!();
    println!("{title}");
    if outs.len() != REDIS_PROCESSES {
        println!("  a child process failed (see above)");
        v.failed.push("redis: the run failed".to_owned());
        return;
    }

    // Merge: each (job, T) of the window must have run in exactly one process.
    let seconds = usize::try_from(cfg.seconds).expect("SCALE_SECONDS");
    let expected = n * seconds;
    let mut runs_of = vec![0u32; expected];
    let mut lateness = Vec::with_capacity(expected);
    for o in &outs {
        for &(slot, l) in &o.ran {
            runs_of[slot] += 1;
            lateness.push(l);
        }
    }
    let local_dup: u64 = outs.iter().map(|o| o.fields.u("duplicated")).sum();
    let missed = runs_of.iter().filter(|&&r| r == 0).count() as u64;
    let duplicated = runs_of
        .iter()
        .map(|&r| u64::from(r.saturating_sub(1)))
        .sum::<u64>()
        + local_dup;
    let ran = runs_of.iter().filter(|&&r| r > 0).count() as u64;
    lateness.sort_unstable();
    let mut claim_us: Vec<i64> = outs
        .iter()
        .flat_map(|o| o.claim_us.iter().copied())
        .collect();
    claim_us.sort_unstable();
    let mut outcome_us: Vec<i64> = outs
        .iter()
        .flat_map(|o| o.outcome_us.iter().copied())
        .collect();
    outcome_us.sort_unstable();
    let sum = |key: &str| outs.iter().map(|o| o.fields.u(key)).sum::<u64>();
    let (won, elsewhere, busy, misfired) =
        (sum("won"), sum("elsewhere"), sum("busy"), sum("misfired"));
    let ms = |us: i64| format!("{:.3}", us as f64 / 1000.0);
    let fires = expected as f64;
    // A claim that lost (already ran, or lock held) is one round trip; the rest is the winners'.
    let losing = elsewhere + busy;
    let per_fire = calls as f64 / fires;
    let expected_per_fire = 2.0 + losing as f64 / fires;
    let per_run = if won > 0 {
        calls.saturating_sub(losing) as f64 / won as f64
    } else {
        0.0
    };
    let label = |what: &str| format!("redis N={}: {what}", thousands(n as u64));

    println!("  fires = the (job, T) pairs of the {} s window, each to run exactly once in one of the {REDIS_PROCESSES} processes", cfg.seconds);
    println!("  lateness = run start - T, over all runs; claims = claim attempts of all processes (one EVALSHA each)");
    println!("  claim latency = one claim's round trip (`cronguard_claim_latency_seconds`); T -> claim outcome = from T to each");
    println!("  process's `started` / `claimed_elsewhere` / `skipped` event of the fire; round trips = `cmdstat_evalsha` + `cmdstat_eval`");
    println!("  calls (`INFO commandstats`) over the window, per fire, and per run without the losing claims (1 round trip each)");
    redis_row("", "value".into(), "expected", "");
    redis_row(
        "start-up, slowest process (ms)",
        format!(
            "{:.1}",
            outs.iter()
                .map(|o| o.fields.ms("startup_us"))
                .fold(0.0, f64::max)
        ),
        "",
        "",
    );
    redis_row(
        "fires run / expected",
        format!("{}/{}", thousands(ran), thousands(expected as u64)),
        "",
        "",
    );
    redis_row(
        "runs per process",
        outs.iter()
            .map(|o| thousands(o.ran.len() as u64))
            .collect::<Vec<_>>()
            .join(" / "),
        "",
        "",
    );
    redis_row(
        "duplicated (across the processes)",
        thousands(duplicated),
        "= 0",
        v.check(duplicated == 0, label("0 duplicated")),
    );
    redis_row(
        "missed",
        thousands(missed),
        "= 0",
        v.check(missed == 0, label("0 missed")),
    );
    redis_row("lateness p50 (ms)", ms(percentile(&lateness, 0.50)), "", "");
    redis_row("lateness p99 (ms)", ms(percentile(&lateness, 0.99)), "", "");
    redis_row(
        "lateness max (ms)",
        ms(lateness.last().copied().unwrap_or(0)),
        "",
        "",
    );
    redis_row(
        "claims per second (all processes)",
        format!("{:.0}", claim_us.len() as f64 / cfg.seconds as f64),
        &format!("{} x N", REDIS_PROCESSES),
        "",
    );
    redis_row(
        "claims won / ran elsewhere / busy / misfired",
        format!(
            "{}/{}/{}/{}",
            thousands(won),
            thousands(elsewhere),
            thousands(busy),
            thousands(misfired)
        ),
        "",
        "",
    );
    redis_row(
        "claim latency p50 (ms)",
        ms(percentile(&claim_us, 0.50)),
        "",
        "",
    );
    redis_row(
        "claim latency p99 (ms)",
        ms(percentile(&claim_us, 0.99)),
        "",
        "",
    );
    redis_row(
        "T -> claim outcome p50 (ms)",
        ms(percentile(&outcome_us, 0.50)),
        "",
        "",
    );
    redis_row(
        "T -> claim outcome p99 (ms)",
        ms(percentile(&outcome_us, 0.99)),
        "",
        "",
    );
    redis_row(
        "round trips per fire (all processes)",
        format!("{per_fire:.3}"),
        &format!("2 + losing claims = {expected_per_fire:.3}"),
        "",
    );
    redis_row(
        "round trips per run (claiming process)",
        format!("{per_run:.3}"),
        "= 2",
        v.check(
            (per_run - 2.0).abs() < 0.005,
            label("round trips per run == 2"),
        ),
    );
    if misfired > 0 {
        println!(
            "  note: cronguard reported {} misfired fires in the window",
            thousands(misfired)
        );
    }
}

fn main() {
    match std::env::var("SCALE_CHILD") {
        Ok(spec) if spec.starts_with("cronguard:redis:") => redis_child(&spec),
        Ok(spec) => child(&spec),
        Err(_) => parent(),
    }
}
