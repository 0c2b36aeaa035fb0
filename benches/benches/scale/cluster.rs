//! The cluster scenarios' common part: N jobs every `SCALE_CLUSTER_PERIOD` seconds (epoch
//! aligned) with a shared guard (`redis` or `postgres`, lease 30 s, empty body) in three scheduler
//! processes against one server. The parent fixes one window for all three; each child reports
//! the (job, T) it ran, its claims' latencies and outcomes; the parent merges them and counts
//! missed and duplicated fires across the processes.

use std::process::Child;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{Job, JobContext, Lock, Schedule};
use serde::{Deserialize, Serialize};

use crate::measure::{self, at_second, percentile, sleep_until_wall, ChildSpec};
use crate::record::Recorder;
use crate::report::{median, ms, thousands, value_row, Verdicts};
use crate::Config;

/// How many scheduler processes share the guard.
pub const PROCESSES: usize = 3;

/// What one scheduler process of a cluster scenario measured.
#[derive(Serialize, Deserialize, Debug)]
pub struct ReplicaResult {
    pub instance: usize,
    /// Build, register and start the N jobs (connecting included).
    pub startup_us: u64,
    /// Fires this process ran twice itself.
    pub duplicated: u64,
    pub outside: u64,
    pub misaligned: u64,
    /// Claims it won (`started`).
    pub won: u64,
    /// Claims that found the fire already run (`claimed_elsewhere`).
    pub elsewhere: u64,
    /// Claims that found the lock held (`skipped`).
    pub busy: u64,
    pub misfired: u64,
    /// Claim outcomes of every fire of the whole run (start-up to shutdown), not only the window's.
    pub claims_total: u64,
    /// Every `cronguard_claim_latency_seconds` sample of the window, in µs.
    pub claim_us: Vec<i64>,
    /// From `T` to this process's outcome event of the fire, in µs, one per fire of the window.
    pub outcome_us: Vec<i64>,
    /// Per fire instant of the window: the latest outcome, in µs after `T`.
    pub burst_us: Vec<i64>,
    /// (slot, lateness in µs) of every fire of the window this process ran; slot = job × fires +
    /// the fire's index in the window.
    pub ran: Vec<(u32, i32)>,
    /// User + sys CPU seconds of this process over the window.
    pub cpu_s: f64,
    pub rss_kib: u64,
}

#[derive(Default)]
struct Outcomes {
    claims_total: u64,
    won: u64,
    elsewhere: u64,
    busy: u64,
    misfired: u64,
    outcome_us: Vec<i64>,
    burst_us: Vec<i64>,
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

/// The window every process and the parent share.
#[derive(Clone, Copy)]
pub struct Window {
    /// The first measured fire (whole seconds since the epoch, a multiple of the period).
    pub start: i64,
    pub period: i64,
    pub fires: i64,
}

impl Window {
    fn from_cfg(cfg: &Config, start: i64) -> Self {
        let period = i64::try_from(cfg.cluster_period).expect("SCALE_CLUSTER_PERIOD");
        Window {
            start,
            period,
            fires: i64::try_from(cfg.cluster_seconds).expect("SCALE_CLUSTER_SECONDS") / period,
        }
    }

    /// Where the measured span begins: half a period before the first fire, so that it holds
    /// exactly `fires` bursts, each in its middle.
    pub fn from(&self) -> DateTime<Utc> {
        at_second(self.start) - TimeDelta::milliseconds(self.period * 500)
    }

    pub fn to(&self) -> DateTime<Utc> {
        at_second(self.start + self.fires * self.period)
            - TimeDelta::milliseconds(self.period * 500)
    }

    pub fn seconds(&self) -> f64 {
        (self.fires * self.period) as f64
    }

    /// The index in the window of the fire at `t`.
    fn index(&self, t: DateTime<Utc>) -> Option<usize> {
        let d = t.timestamp() - self.start;
        (t.timestamp_subsec_nanos() == 0
            && d >= 0
            && d % self.period == 0
            && d / self.period < self.fires)
            .then(|| usize::try_from(d / self.period).expect("a small index"))
    }
}

/// One scheduler process: `SCALE_CHILD=cronguard:<redis|postgres>:<n>`, with the server's URL in
/// `SCALE_CLUSTER_URL`, the first measured fire in `SCALE_CLUSTER_WINDOW` (the same for all three)
/// and this process's number in `SCALE_CLUSTER_INSTANCE`.
pub fn child(cfg: &Config, spec: &ChildSpec) {
    let n = spec.n;
    let url = std::env::var("SCALE_CLUSTER_URL").expect("SCALE_CLUSTER_URL");
    let start: i64 = std::env::var("SCALE_CLUSTER_WINDOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("SCALE_CLUSTER_WINDOW");
    let instance: usize = std::env::var("SCALE_CLUSTER_INSTANCE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let w = Window::from_cfg(cfg, start);
    let fires = usize::try_from(w.fires).expect("a small window");
    let rec = Recorder::new(n, fires, cfg.cluster_period).leak();
    rec.window_start.store(w.start, Ordering::Release);

    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().expect("the only metrics recorder");

    let outcomes: &'static Mutex<Outcomes> = Box::leak(Box::new(Mutex::new(Outcomes {
        burst_us: vec![0; fires],
        ..Outcomes::default()
    })));

    let rt = measure::runtime();
    let t0 = Instant::now();
    let lock = if spec.mode == "postgres" {
        Lock::Postgres
    } else {
        Lock::Redis
    };
    let handle = rt.block_on(async {
        let mut builder = cronguard::builder()
            .registered_jobs(false)
            .instance(format!("scale-{instance}"))
            .shutdown_timeout(Duration::from_secs(5))
            .claim_ahead(Duration::from_millis(cfg.claim_ahead_ms))
            .partition_ownership(cfg.ownership)
            .on_event(move |e: &cronguard::Event| {
                let claim = matches!(
                    e.kind,
                    cronguard::EventKind::Started
                        | cronguard::EventKind::ClaimedElsewhere
                        | cronguard::EventKind::Skipped { .. }
                        | cronguard::EventKind::Misfired { .. }
                );
                if !claim {
                    return;
                }
                let mut o = outcomes.lock().expect("not poisoned");
                o.claims_total += 1;
                let Some(k) = w.index(e.fire_time) else {
                    return;
                };
                match e.kind {
                    cronguard::EventKind::Started => o.won += 1,
                    cronguard::EventKind::ClaimedElsewhere => o.elsewhere += 1,
                    cronguard::EventKind::Skipped { .. } => o.busy += 1,
                    cronguard::EventKind::Misfired { .. } => o.misfired += 1,
                    _ => return,
                }
                let us = (e.at - e.fire_time).num_microseconds().unwrap_or(i64::MAX);
                o.outcome_us.push(us);
                o.burst_us[k] = o.burst_us[k].max(us);
            });
        builder = match lock {
            Lock::Postgres => builder.postgres_url(url),
            _ => builder.redis_url(url),
        };
        let schedule =
            Schedule::every(Duration::from_secs(cfg.cluster_period)).expect("a valid schedule");
        for i in 0..n {
            builder = builder.job(
                Job::new(format!("job{i}"), schedule.clone())
                    .lock(lock.clone())
                    .lease(Duration::from_secs(30))
                    .run(move |ctx: JobContext| async move {
                        rec.record(i, ctx.fire_time());
                    }),
            );
        }
        builder.start().await.expect("cronguard starts")
    });
    let startup = t0.elapsed();

    sleep_until_wall(w.from());
    let _warmup = claim_latencies_us(&snapshotter);
    let cpu0 = measure::cpu_seconds();
    sleep_until_wall(w.to());
    let cpu_s = measure::cpu_seconds() - cpu0;
    let mut claim_us = claim_latencies_us(&snapshotter);
    // Wait for an outcome of every fire of the window in this process.
    let expected = n as u64 * w.fires as u64;
    sleep_until_wall(at_second(w.start + (w.fires - 1) * w.period) + TimeDelta::milliseconds(200));
    measure::wait_until(Duration::from_secs(cfg.settle), || {
        outcomes.lock().expect("not poisoned").total() >= expected
    });
    let rss_kib = measure::peak_rss_kib();
    // Hooks have seen every event once shutdown returns.
    rt.block_on(handle.shutdown_within(Duration::from_secs(5)));
    claim_us.sort_unstable();

    let o = outcomes.lock().expect("not poisoned");
    measure::emit(&ReplicaResult {
        instance,
        startup_us: u64::try_from(startup.as_micros()).unwrap_or(u64::MAX),
        duplicated: rec.duplicated.load(Ordering::Relaxed),
        outside: rec.outside.load(Ordering::Relaxed),
        misaligned: rec.misaligned.load(Ordering::Relaxed),
        won: o.won,
        elsewhere: o.elsewhere,
        busy: o.busy,
        misfired: o.misfired,
        claims_total: o.claims_total,
        claim_us,
        outcome_us: o.outcome_us.clone(),
        burst_us: o.burst_us.clone(),
        ran: rec.ran(),
        cpu_s,
        rss_kib,
    });
}

/// The three scheduler processes of a run, started.
pub struct Launched {
    pub window: Window,
    children: Vec<Child>,
    mode: &'static str,
    n: usize,
}

/// Starts the three processes against `url`; the window begins at the first multiple of the
/// period that leaves them 3 s to start and one fire of warm-up.
pub fn launch(cfg: &Config, mode: &'static str, n: usize, url: &str) -> Launched {
    let period = i64::try_from(cfg.cluster_period).expect("SCALE_CLUSTER_PERIOD");
    let earliest = Utc::now().timestamp() + 3 + period;
    let start = (earliest + period - 1) / period * period;
    let window = Window::from_cfg(cfg, start);
    eprintln!("scale: running cronguard:{mode}:{n} x {PROCESSES} against {url} ...");
    let spec = ChildSpec::new("cronguard", mode, n);
    let children = (0..PROCESSES)
        .map(|i| {
            measure::spawn(
                &spec,
                &[
                    ("SCALE_CLUSTER_URL", url.to_owned()),
                    ("SCALE_CLUSTER_WINDOW", start.to_string()),
                    ("SCALE_CLUSTER_INSTANCE", i.to_string()),
                ],
            )
        })
        .collect();
    Launched {
        window,
        children,
        mode,
        n,
    }
}

/// What the three processes did, merged.
pub struct Merged {
    pub n: usize,
    pub window: Window,
    pub replicas: Vec<ReplicaResult>,
    pub fires: u64,
    pub ran: u64,
    pub missed: u64,
    pub duplicated: u64,
    /// Over all runs, sorted.
    pub lateness: Vec<i64>,
    /// The p99 of each burst of the window, in order, and of each process's runs.
    pub p99_by_burst: Vec<i64>,
    pub p99_by_process: Vec<i64>,
    pub claim_us: Vec<i64>,
    pub outcome_us: Vec<i64>,
    pub won: u64,
    pub elsewhere: u64,
    pub busy: u64,
    pub misfired: u64,
    /// Claim outcomes of all processes over their whole run.
    pub claims_total: u64,
    /// Claims of all processes per second of a burst: 3 N over the time from T to the last
    /// outcome of that fire instant, the median over the instants.
    pub burst_claims_per_s: f64,
}

impl Launched {
    /// Waits for the three processes and merges their results; `None` when one failed.
    pub fn finish(self) -> Option<Merged> {
        let what = format!("cronguard:{}:{}", self.mode, self.n);
        let replicas: Vec<ReplicaResult> = self
            .children
            .into_iter()
            .filter_map(|c| measure::collect(&what, c))
            .collect();
        if replicas.len() != PROCESSES {
            return None;
        }
        let w = self.window;
        let fires = usize::try_from(w.fires).expect("a small window");
        let expected = self.n * fires;
        let mut runs_of = vec![0u32; expected];
        let mut lateness = Vec::with_capacity(expected);
        let mut by_burst = vec![Vec::new(); fires];
        let mut p99_by_process = Vec::with_capacity(replicas.len());
        for r in &replicas {
            let mut own = Vec::with_capacity(r.ran.len());
            for &(slot, l) in &r.ran {
                runs_of[slot as usize] += 1;
                lateness.push(i64::from(l));
                by_burst[slot as usize % fires].push(i64::from(l));
                own.push(i64::from(l));
            }
            own.sort_unstable();
            p99_by_process.push(percentile(&own, 0.99));
        }
        lateness.sort_unstable();
        let p99_by_burst = by_burst
            .into_iter()
            .map(|mut b| {
                b.sort_unstable();
                percentile(&b, 0.99)
            })
            .collect();
        let local_dup: u64 = replicas.iter().map(|r| r.duplicated).sum();
        let sorted = |f: fn(&ReplicaResult) -> &Vec<i64>| {
            let mut all: Vec<i64> = replicas.iter().flat_map(|r| f(r).iter().copied()).collect();
            all.sort_unstable();
            all
        };
        let sum = |f: fn(&ReplicaResult) -> u64| replicas.iter().map(f).sum::<u64>();
        let bursts: Vec<f64> = (0..fires)
            .map(|k| {
                let last = replicas.iter().map(|r| r.burst_us[k]).max().unwrap_or(0);
                (PROCESSES * self.n) as f64 / (last.max(1) as f64 / 1e6)
            })
            .collect();
        Some(Merged {
            n: self.n,
            window: w,
            fires: expected as u64,
            ran: runs_of.iter().filter(|&&r| r > 0).count() as u64,
            missed: runs_of.iter().filter(|&&r| r == 0).count() as u64,
            duplicated: runs_of
                .iter()
                .map(|&r| u64::from(r.saturating_sub(1)))
                .sum::<u64>()
                + local_dup,
            lateness,
            p99_by_burst,
            p99_by_process,
            claim_us: sorted(|r| &r.claim_us),
            outcome_us: sorted(|r| &r.outcome_us),
            won: sum(|r| r.won),
            elsewhere: sum(|r| r.elsewhere),
            busy: sum(|r| r.busy),
            misfired: sum(|r| r.misfired),
            claims_total: sum(|r| r.claims_total),
            burst_claims_per_s: median(bursts),
            replicas,
        })
    }
}

impl Merged {
    /// Claims of all processes per second, over the window.
    pub fn claims_per_s(&self) -> f64 {
        (self.won + self.elsewhere + self.busy) as f64 / self.window.seconds()
    }

    /// The rows every cluster scenario prints: fires, duplicates, misses, lateness (with its
    /// p99 target), claims and their latency, the processes' own CPU and RSS.
    pub fn print_common(&self, guard: &str, p99_target_ms: f64, v: &mut Verdicts) {
        let label = |what: &str| format!("{guard} N={}: {what}", thousands(self.n as u64));
        println!(
            "  fires = the (job, T) pairs of the {} s window, each to run exactly once in one of the {PROCESSES} processes",
            self.window.seconds()
        );
        println!("  lateness = run start - T, over all runs; claims = claim attempts of all processes; claim latency =");
        println!("  `cronguard_claim_latency_seconds`; T -> claim outcome = from T to each process's `started` /");
        println!("  `claimed_elsewhere` / `skipped` event of the fire; burst = 3 N claims over T -> the fire's last outcome");
        crate::report::value_header();
        value_row(
            "start-up, slowest process (ms)",
            format!(
                "{:.1}",
                self.replicas
                    .iter()
                    .map(|r| r.startup_us as f64 / 1000.0)
                    .fold(0.0, f64::max)
            ),
            "",
            "",
        );
        value_row(
            "fires run / expected",
            format!("{}/{}", thousands(self.ran), thousands(self.fires)),
            "",
            "",
        );
        value_row(
            "runs per process",
            self.replicas
                .iter()
                .map(|r| thousands(r.ran.len() as u64))
                .collect::<Vec<_>>()
                .join(" / "),
            "",
            "",
        );
        value_row(
            "duplicated (across the processes)",
            thousands(self.duplicated),
            "= 0",
            v.check(self.duplicated == 0, label("0 duplicated")),
        );
        value_row(
            "missed",
            thousands(self.missed),
            "= 0",
            v.check(self.missed == 0, label("0 missed")),
        );
        value_row(
            "lateness p50 (ms)",
            ms(percentile(&self.lateness, 0.50)),
            "",
            "",
        );
        let p99 = percentile(&self.lateness, 0.99);
        value_row(
            "lateness p99 (ms)",
            ms(p99),
            &format!("<= {p99_target_ms:.0} ms"),
            v.check(
                !self.lateness.is_empty() && p99 as f64 <= p99_target_ms * 1000.0,
                label(&format!("lateness p99 <= {p99_target_ms:.0} ms")),
            ),
        );
        value_row(
            "lateness max (ms)",
            ms(self.lateness.last().copied().unwrap_or(0)),
            "",
            "",
        );
        let list = |v: &[i64]| v.iter().map(|us| ms(*us)).collect::<Vec<_>>().join(" / ");
        value_row(
            "lateness p99 per burst (ms)",
            list(&self.p99_by_burst),
            "",
            "",
        );
        value_row(
            "lateness p99 per process (ms)",
            list(&self.p99_by_process),
            "",
            "",
        );
        value_row(
            "claims per second (all processes, window)",
            format!("{:.0}", self.claims_per_s()),
            &format!("{PROCESSES} x N / period"),
            "",
        );
        value_row(
            "claims per second (all processes, burst)",
            format!("{:.0}", self.burst_claims_per_s),
            "",
            "",
        );
        value_row(
            "claims won / ran elsewhere / busy / misfired",
            format!(
                "{}/{}/{}/{}",
                thousands(self.won),
                thousands(self.elsewhere),
                thousands(self.busy),
                thousands(self.misfired)
            ),
            "",
            "",
        );
        value_row(
            "claim latency p50 / p99 (ms)",
            format!(
                "{} / {}",
                ms(percentile(&self.claim_us, 0.50)),
                ms(percentile(&self.claim_us, 0.99))
            ),
            "",
            "",
        );
        value_row(
            "T -> claim outcome p50 / p99 (ms)",
            format!(
                "{} / {}",
                ms(percentile(&self.outcome_us, 0.50)),
                ms(percentile(&self.outcome_us, 0.99))
            ),
            "",
            "",
        );
        value_row(
            "scheduler CPU per process (% of a core)",
            self.replicas
                .iter()
                .map(|r| format!("{:.1}", 100.0 * r.cpu_s / self.window.seconds()))
                .collect::<Vec<_>>()
                .join(" / "),
            "",
            "",
        );
        value_row(
            "peak RSS per process (MiB)",
            self.replicas
                .iter()
                .map(|r| format!("{:.0}", r.rss_kib as f64 / 1024.0))
                .collect::<Vec<_>>()
                .join(" / "),
            "",
            "",
        );
        if self.misfired > 0 {
            println!(
                "  note: cronguard reported {} misfired fires in the window",
                thousands(self.misfired)
            );
        }
        let odd: u64 = self.replicas.iter().map(|r| r.misaligned).sum();
        if odd > 0 {
            println!("  note: {odd} runs of fires off the grid of the period");
        }
    }
}
