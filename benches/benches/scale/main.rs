//! Scale: cronguard against a plain-tokio baseline on the same load, the `redis` and `postgres`
//! guards at cluster scale, and a million jobs in one process — in one run, with a PASS or FAIL
//! printed next to every target.
//!
//! ```sh
//! cargo bench -p cronguard-benches --bench scale
//! # one scenario, or a few:
//! SCALE_SCENARIOS=redis,postgres cargo bench -p cronguard-benches --bench scale
//! # a quick run of every scenario (shorter windows, fewer jobs and rounds):
//! SCALE_QUICK=1 cargo bench -p cronguard-benches --bench scale
//! ```
//!
//! **Scenarios** (`SCALE_SCENARIOS`, comma-separated, default all, in this order):
//!
//! - `local` ([`local`]): N jobs (`SCALE_NS`, default `1,1000,10000,100000`), each firing every
//!   second on the epoch-aligned grid, `local` guard, empty body, against a plain tokio program
//!   with one `sleep_until` task per job. After a warm-up (`SCALE_WARMUP`, default 2 s) every fire
//!   of a measured window of `SCALE_SECONDS` (default 10) whole seconds must run exactly once per
//!   job. `SCALE_ROUNDS` rounds per N (default 3, the sides alternating); the table shows the
//!   median. Targets: 0 missed and 0 duplicated fires; lateness p99 ≤ 1.25 × baseline at N = 1
//!   (+1 ms) and N ≥ 10,000; CPU ≤ 2 × baseline; peak RSS ≤ 2 × baseline + 20 MiB; start-up of
//!   100,000 jobs < 1 s.
//! - `idle` ([`idle`]): `SCALE_IDLE_N` jobs (default 100,000) on the hourly cron `0 0 * * * *`,
//!   measured for `SCALE_IDLE_SECONDS` (default `SCALE_SECONDS`). Target: CPU ≤ 1 % of a core.
//! - `redis` ([`redis`]): `SCALE_REDIS_N` jobs (default 10,000) every `SCALE_CLUSTER_PERIOD`
//!   seconds (default 10, epoch aligned) with `lock = redis` in three scheduler processes against
//!   one local `redis-server`, for `SCALE_CLUSTER_SECONDS` (default 60). Targets: every fire ran
//!   exactly once across the processes; lateness p99 ≤ 100 ms; round trips (`EVALSHA` + `EVAL`
//!   calls) per fire per replica ≤ 0.01. Also Redis CPU per fire and the server's own ceiling for
//!   the claim script (`redis-benchmark`). The scheduler processes claim each fire up to
//!   `SCALE_CLAIM_AHEAD_MS` before its instant (default 250; `0`: at the instant;
//!   docs/design/standby.md); `SCALE_OWNERSHIP=0` turns partition ownership off (default on, as
//!   in the library; docs/design/ownership.md).
//! - `postgres` ([`postgres`]): the same with `lock = postgres` (`SCALE_POSTGRES_N`, default
//!   10,000) against a PostgreSQL the benchmark starts. Targets: every fire once; lateness p99 ≤
//!   250 ms; statements per fire per replica ≤ 0.01. Also the server's ceiling for the claim
//!   function (`pgbench`).
//! - `million` ([`million`]): `SCALE_MILLION_N` jobs (default 1,000,000) in one process, job `i`
//!   on the cron `<i % 60> * * * * *` (each fires once a minute, 1/60 of them each second), for
//!   `SCALE_MILLION_SECONDS` (default 10; `SCALE_MILLION=1` for the whole minute, 60); then as
//!   many jobs that never fire in the window. Targets: start-up ≤ 2 s; peak RSS ≤ 400 MiB; 0 missed
//!   and 0 duplicated fires of the window; idle CPU ≤ 1 % of a core.
//!
//! The scheduler processes log cronguard's errors on stderr (`SCALE_LOG`, an `EnvFilter`, e.g.
//! `warn`). `SCALE_QUICK=1` shortens every scenario (windows of 3–6 s, one round, fewer jobs); any
//! variable set explicitly wins over it.
//!
//! **Processes.** Every side, N, round and replica runs in a fresh child process of this same
//! binary ([`measure`]: re-executed with `SCALE_CHILD=<side>:<mode>:<n>`), so that CPU (user + sys
//! from `getrusage`) and peak RSS (`VmHWM`) are its own. A child prints its results as one JSON
//! line (`SCALE_RESULT {...}`, a typed struct per scenario) that the parent parses; the parent
//! merges them and prints the tables ([`report`]).

#![forbid(unsafe_code)]
#![allow(missing_docs)]

mod cluster;
mod idle;
mod local;
mod measure;
mod million;
mod postgres;
mod record;
mod redis;
mod report;

use report::Verdicts;

/// A scenario of this benchmark.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Scenario {
    Local,
    Idle,
    Redis,
    Postgres,
    Million,
}

impl Scenario {
    const ALL: [Scenario; 5] = [
        Scenario::Local,
        Scenario::Idle,
        Scenario::Redis,
        Scenario::Postgres,
        Scenario::Million,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::Local => "local",
            Scenario::Idle => "idle",
            Scenario::Redis => "redis",
            Scenario::Postgres => "postgres",
            Scenario::Million => "million",
        }
    }
}

/// Settings from the environment (inherited by the child processes).
pub struct Config {
    pub scenarios: Vec<Scenario>,
    pub quick: bool,
    pub ns: Vec<usize>,
    pub seconds: u64,
    pub warmup: u64,
    pub idle_n: usize,
    pub idle_seconds: u64,
    /// How long after the window stragglers may still run before their fires count as missed.
    pub settle: u64,
    /// Rounds per N of the local scenario.
    pub rounds: usize,
    pub redis_n: usize,
    pub postgres_n: usize,
    /// The period of the cluster scenarios' jobs, in seconds.
    pub cluster_period: u64,
    /// The measured window of the cluster scenarios, in seconds (a multiple of the period).
    pub cluster_seconds: u64,
    /// `Builder::claim_ahead` of the cluster scenarios' scheduler processes, in ms.
    pub claim_ahead_ms: u64,
    /// `Builder::partition_ownership` of the cluster scenarios' scheduler processes.
    pub ownership: bool,
    /// Claims the ceiling measurements send (`redis-benchmark -n`).
    pub ceiling_requests: u64,
    /// Seconds of the `pgbench` ceiling run.
    pub ceiling_seconds: u64,
    pub million_n: usize,
    pub million_seconds: u64,
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

fn env_usize(name: &str, default: usize) -> usize {
    usize::try_from(env_u64(name, default as u64)).unwrap_or_else(|_| panic!("{name}: too large"))
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

impl Config {
    pub fn from_env() -> Self {
        let quick = env_flag("SCALE_QUICK");
        let pick = |full: u64, short: u64| if quick { short } else { full };
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
            Err(_) if quick => vec![1, 1_000],
            Err(_) => vec![1, 1_000, 10_000, 100_000],
        };
        let scenarios = match std::env::var("SCALE_SCENARIOS") {
            Ok(v) => v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    Scenario::ALL
                        .into_iter()
                        .find(|c| c.name() == s)
                        .unwrap_or_else(|| {
                            panic!(
                                "SCALE_SCENARIOS: unknown scenario `{s}`; expected one of: local, idle, redis, postgres, million"
                            )
                        })
                })
                .collect(),
            Err(_) => Scenario::ALL.to_vec(),
        };
        let seconds = env_u64("SCALE_SECONDS", pick(10, 3)).max(1);
        let cluster_period = env_u64("SCALE_CLUSTER_PERIOD", pick(10, 2)).max(1);
        let cluster_seconds = env_u64("SCALE_CLUSTER_SECONDS", pick(60, 6)).max(cluster_period);
        // Whole periods only.
        let cluster_seconds = cluster_seconds / cluster_period * cluster_period;
        let million_default = if env_flag("SCALE_MILLION") {
            60
        } else {
            pick(10, 5)
        };
        Config {
            scenarios,
            quick,
            ns,
            seconds,
            warmup: env_u64("SCALE_WARMUP", 2),
            idle_n: env_usize("SCALE_IDLE_N", pick(100_000, 10_000) as usize),
            idle_seconds: env_u64("SCALE_IDLE_SECONDS", seconds).max(1),
            settle: env_u64("SCALE_SETTLE", 10),
            rounds: env_usize("SCALE_ROUNDS", pick(3, 1) as usize).max(1),
            redis_n: env_usize("SCALE_REDIS_N", pick(10_000, 1_000) as usize),
            postgres_n: env_usize("SCALE_POSTGRES_N", pick(10_000, 1_000) as usize),
            cluster_period,
            cluster_seconds,
            claim_ahead_ms: env_u64("SCALE_CLAIM_AHEAD_MS", 250),
            ownership: env_u64("SCALE_OWNERSHIP", 1) == 1,
            ceiling_requests: env_u64("SCALE_CEILING_REQUESTS", pick(200_000, 50_000)),
            ceiling_seconds: env_u64("SCALE_CEILING_SECONDS", pick(5, 3)).max(1),
            million_n: env_usize("SCALE_MILLION_N", 1_000_000),
            million_seconds: env_u64("SCALE_MILLION_SECONDS", million_default).clamp(1, 60),
        }
    }
}

fn parent() {
    let cfg = Config::from_env();
    let mut v = Verdicts::default();
    let names: Vec<_> = cfg.scenarios.iter().map(|s| s.name()).collect();
    println!(
        "cronguard scale benchmark: scenarios {}{}; tokio multi-thread, 2 workers; every side, N, round and replica in a fresh process",
        names.join(","),
        if cfg.quick { " (quick)" } else { "" }
    );
    for scenario in &cfg.scenarios {
        match scenario {
            Scenario::Local => local::run(&cfg, &mut v),
            Scenario::Idle => idle::run(&cfg, &mut v),
            Scenario::Redis => redis::run(&cfg, &mut v),
            Scenario::Postgres => postgres::run(&cfg, &mut v),
            Scenario::Million => million::run(&cfg, &mut v),
        }
    }
    v.summary();
}

fn main() {
    match std::env::var("SCALE_CHILD") {
        Ok(spec) => {
            // cronguard's errors on stderr (`SCALE_LOG=warn` for its warnings too: under load
            // they come by the thousand); runs, misfires and skips are counted.
            let filter = std::env::var("SCALE_LOG").unwrap_or_else(|_| "error".to_owned());
            tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_writer(std::io::stderr)
                .init();
            let cfg = Config::from_env();
            let child = measure::ChildSpec::parse(&spec);
            match child.mode.as_str() {
                "busy" | "idle" => local::child(&cfg, &child),
                "redis" | "postgres" => cluster::child(&cfg, &child),
                "million" | "million-idle" => million::child(&cfg, &child),
                other => panic!("SCALE_CHILD `{spec}`: unknown mode `{other}`"),
            }
        }
        Err(_) => parent(),
    }
}
