//! `cronguard`: lists, pauses, resumes, runs now and reads the history of the jobs of a shared
//! guard's store (a lock dir, Redis, PostgreSQL) without running them, and checks from outside
//! the replicas that they still run (`health`), through `cronguard::admin`, the code the replicas
//! use (docs/operations/cli.md).
//!
//! Exit status: 0 when the request was carried out, 1 with the reason on stderr otherwise;
//! `health` exits with 0 when every job is on time, 1 when a job's newest due fire did not run,
//! and 2 when the check could not be made.

use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Parser, Subcommand};
use cronguard::admin::{Store, StoreHealth, StoredJob, StoredJobState};
use cronguard::history::HistoryEntry;

/// Operate the jobs of a cronguard store: the replicas see every change within about a second.
#[derive(Debug, Parser)]
#[command(
    name = "cronguard",
    version,
    after_help = "Exit status: 0 when the request was carried out, 1 with the reason on stderr otherwise; `health` has its own (`cronguard health --help`)."
)]
struct Cli {
    #[command(flatten)]
    store: StoreArgs,
    #[command(subcommand)]
    command: Command,
}

/// Where the jobs' guard keeps its state: exactly one of `--redis`, `--postgres`, `--lock-dir`,
/// or else of `CRONGUARD_REDIS_URL`, `CRONGUARD_POSTGRES_URL`, `CRONGUARD_LOCK_DIR`.
#[derive(Debug, Args)]
struct StoreArgs {
    /// The Redis of `lock = "redis"` jobs [env: CRONGUARD_REDIS_URL]
    #[arg(long, value_name = "URL", global = true)]
    redis: Option<String>,
    /// The key prefix of the Redis guards (`Builder::redis_prefix`)
    #[arg(long, value_name = "P", default_value = "cronguard", global = true)]
    prefix: String,
    /// The PostgreSQL of `lock = "postgres"` jobs [env: CRONGUARD_POSTGRES_URL]; TLS as its
    /// `sslmode` says, with the CA of `sslrootcert` or CRONGUARD_POSTGRES_CA_FILE
    #[arg(long, value_name = "URL", global = true)]
    postgres: Option<String>,
    /// The schema of the PostgreSQL guards [env: CRONGUARD_POSTGRES_SCHEMA] [default: cronguard]
    #[arg(long, value_name = "S", global = true)]
    schema: Option<String>,
    /// The lock dir of `lock = "file"` jobs [env: CRONGUARD_LOCK_DIR]
    #[arg(long, value_name = "DIR", global = true)]
    lock_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The jobs the replicas announced: schedule, next fire, last run, pause
    List {
        /// JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Pause a job on every replica: its fires are reported as skipped until it is resumed
    Pause {
        /// The job's name
        job: String,
        /// Who pauses it [default: $USER@hostname]
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Resume a paused job on every replica
    Resume {
        /// The job's name
        job: String,
        /// Who resumes it [default: $USER@hostname]
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Run a job now, outside its schedule, on exactly one replica; prints the run's key
    Trigger {
        /// The job's name
        job: String,
    },
    /// Whether each job's newest due fire ran, told from the store alone: a dead-man check that
    /// still answers when every replica is gone
    #[command(
        long_about = "Whether each job's newest due fire ran, told from the store alone: a dead-man check that still answers when every replica is gone.\n\nFor each job the replicas announced, the newest fire T whose grace (misfire grace plus jitter, 60 s for jobs announced by earlier versions) has passed is missed when the store holds no fate for it (no replica claimed it, nor reported it dropped or missed: no process is running the job), overdue when it was reported dropped or missed but not run, and on time once it or a later fire was claimed. A job of which the store holds no record counts only the fires due since it was announced. Paused jobs are not checked. Run it every few minutes from outside the replicas (cron, a Kubernetes CronJob).",
        after_help = "Exit status:\n  0  every job is on time (or paused)\n  1  a job is missed or overdue; each is named on stderr\n  2  the check could not be made: the store could not be used, no job is in its roster, or a job's state could not be read (and none is missed or overdue)"
    )]
    Health {
        /// JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// A job's run history, where its guard keeps one (`lock = "postgres"`, `history = true`)
    History {
        /// The job's name
        job: String,
        /// From this fire on: an RFC 3339 time, or a duration back from now (`24h`, `7days`)
        #[arg(long, value_name = "WHEN", default_value = "24h")]
        since: String,
        /// JSON instead of a table
        #[arg(long)]
        json: bool,
    },
}

/// A failure to report: the message, and its causes.
type Failure = Box<dyn std::error::Error>;

/// `health`: a job's newest due fire did not run.
const LATE: u8 = 1;

/// `health`: the check could not be made.
const UNCHECKED: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            // A dead-man check whose command line is wrong could not check anything.
            let checking = std::env::args_os().any(|a| a == "health");
            return match (usage, checking) {
                (false, _) => ExitCode::SUCCESS,
                (true, false) => ExitCode::FAILURE,
                (true, true) => ExitCode::from(UNCHECKED),
            };
        }
    };
    let failed = if matches!(cli.command, Command::Health { .. }) {
        ExitCode::from(UNCHECKED)
    } else {
        ExitCode::FAILURE
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            fail(&e);
            return failed;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            fail(&*e);
            failed
        }
    }
}

/// Prints `e` with its causes on stderr.
fn fail(e: &dyn std::error::Error) {
    let mut text = format!("cronguard: {e}");
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    eprintln!("{text}");
}

/// Which store, from the flags, else from the environment.
enum Chosen {
    Redis(String),
    Postgres(String),
    LockDir(std::path::PathBuf),
}

fn choose(args: &StoreArgs) -> Result<Chosen, Failure> {
    let flags: Vec<Chosen> = [
        args.redis.clone().map(Chosen::Redis),
        args.postgres.clone().map(Chosen::Postgres),
        args.lock_dir.clone().map(Chosen::LockDir),
    ]
    .into_iter()
    .flatten()
    .collect();
    let from_env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let chosen = match flags.len() {
        0 => [
            from_env("CRONGUARD_REDIS_URL").map(Chosen::Redis),
            from_env("CRONGUARD_POSTGRES_URL").map(Chosen::Postgres),
            from_env("CRONGUARD_LOCK_DIR").map(|d| Chosen::LockDir(d.into())),
        ]
        .into_iter()
        .flatten()
        .collect(),
        _ => flags,
    };
    let mut chosen = chosen.into_iter();
    match (chosen.next(), chosen.next()) {
        (Some(store), None) => Ok(store),
        (None, _) => Err("no store given; name the replicas' store with --redis URL, --postgres URL or --lock-dir DIR (or CRONGUARD_REDIS_URL, CRONGUARD_POSTGRES_URL, CRONGUARD_LOCK_DIR)".into()),
        (Some(_), Some(_)) => Err("several stores given; name exactly one with --redis, --postgres or --lock-dir (a flag wins over CRONGUARD_REDIS_URL, CRONGUARD_POSTGRES_URL and CRONGUARD_LOCK_DIR)".into()),
    }
}

async fn open(args: &StoreArgs) -> Result<Store, Failure> {
    Ok(match choose(args)? {
        Chosen::Redis(url) => Store::redis(&url, &args.prefix).await?,
        Chosen::Postgres(url) => {
            let schema = args
                .schema
                .clone()
                .or_else(|| std::env::var("CRONGUARD_POSTGRES_SCHEMA").ok())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| cronguard::DEFAULT_POSTGRES_SCHEMA.to_owned());
            Store::postgres(&url, &schema).await?
        }
        Chosen::LockDir(dir) => Store::lock_dir(dir)?,
    })
}

async fn run(cli: Cli) -> Result<ExitCode, Failure> {
    let store = open(&cli.store).await?;
    match cli.command {
        Command::Health { json } => {
            let health = store.health().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&health)?);
            } else if health.jobs.is_empty() {
                println!("no jobs: no replica has announced a job in this store");
            } else {
                print!("{}", health_table(&health));
            }
            return Ok(verdict(&health));
        }
        Command::List { json } => {
            let jobs = store.jobs().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&jobs)?);
            } else if jobs.is_empty() {
                println!("no jobs: no replica has announced a job in this store yet (a replica announces its jobs when it starts)");
            } else {
                print!("{}", jobs_table(&jobs));
            }
        }
        Command::Pause { job, by } => {
            let by = by.unwrap_or_else(operator);
            store.pause(&job, &by).await?;
            println!("paused `{job}` (by {by}); the replicas skip its fires until it is resumed");
        }
        Command::Resume { job, by } => {
            let by = by.unwrap_or_else(operator);
            store.resume(&job, &by).await?;
            println!("resumed `{job}` (by {by})");
        }
        Command::Trigger { job } => println!("{}", store.trigger(&job).await?),
        Command::History { job, since, json } => {
            let since = parse_since(&since, Utc::now())?;
            let entries = store.history(&job, since).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&entries)?);
            } else if entries.is_empty() {
                println!("no runs of `{job}` since {}", time(since));
            } else {
                print!("{}", history_table(&entries));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The exit status of `health`, with the jobs that make it on stderr.
fn verdict(health: &StoreHealth) -> ExitCode {
    let late: Vec<String> = health
        .jobs
        .iter()
        .filter(|job| job.state.is_late())
        .map(|job| {
            let what = match job.state {
                StoredJobState::Missed => {
                    "missed: no process gave it a fate; is any replica running the job?"
                }
                _ => "overdue: it was reported dropped or missed, and no later fire ran",
            };
            format!("`{}` (fire {}, {what})", job.name, or_dash(job.due))
        })
        .collect();
    if !late.is_empty() {
        eprintln!(
            "cronguard: the newest due fire did not run for {}: {}",
            if late.len() == 1 {
                "1 job".to_owned()
            } else {
                format!("{} jobs", late.len())
            },
            late.join("; ")
        );
        return ExitCode::from(LATE);
    }
    if health.jobs.is_empty() {
        eprintln!("cronguard: nothing to check: no replica has announced a job in this store (a replica announces its jobs when it starts; a store that lost its data lost its roster too)");
        return ExitCode::from(UNCHECKED);
    }
    let unknown: Vec<&str> = health
        .jobs
        .iter()
        .filter(|job| matches!(job.state, StoredJobState::Unknown { .. }))
        .map(|job| job.name.as_str())
        .collect();
    if !unknown.is_empty() {
        eprintln!(
            "cronguard: the state of {} could not be told (see the table)",
            unknown
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return ExitCode::from(UNCHECKED);
    }
    ExitCode::SUCCESS
}

/// `$USER@hostname`.
fn operator() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".to_owned());
    format!("{user}@{}", gethostname::gethostname().to_string_lossy())
}

/// An RFC 3339 time, or a duration back from `now`.
fn parse_since(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, Failure> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let back = humantime::parse_duration(text).map_err(|e| {
        format!("--since `{text}` is neither an RFC 3339 time (2026-01-31T08:00:00Z) nor a duration (24h, 7days): {e}")
    })?;
    chrono::TimeDelta::from_std(back)
        .ok()
        .and_then(|back| now.checked_sub_signed(back))
        .ok_or_else(|| format!("--since `{text}` reaches too far back").into())
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn or_dash(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| "-".to_owned(), time)
}

/// Rows under a header, each column as wide as its widest cell.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

fn jobs_table(jobs: &[StoredJob]) -> String {
    let rows = jobs
        .iter()
        .map(|job| {
            vec![
                job.name.clone(),
                job.schedule.clone(),
                or_dash(job.next_fire),
                or_dash(job.last_claimed),
                job.paused.as_ref().map_or_else(
                    || "-".to_owned(),
                    |p| format!("by {} at {}", p.by, time(p.at)),
                ),
            ]
        })
        .collect();
    table(
        &["JOB", "SCHEDULE", "NEXT FIRE", "LAST RUN", "PAUSED"],
        rows,
    )
}

fn health_table(health: &StoreHealth) -> String {
    let rows = health
        .jobs
        .iter()
        .map(|job| {
            let (state, detail) = match &job.state {
                StoredJobState::OnTime => ("on time", String::new()),
                StoredJobState::Missed => (
                    "missed",
                    "no fate in the store: no process is running it".to_owned(),
                ),
                StoredJobState::Overdue => {
                    ("overdue", "reported dropped or missed, not run".to_owned())
                }
                StoredJobState::Paused { pause } => {
                    ("paused", format!("by {} at {}", pause.by, time(pause.at)))
                }
                StoredJobState::Unknown { reason } => ("unknown", reason.clone()),
                _ => ("?", String::new()),
            };
            vec![
                job.name.clone(),
                state.to_owned(),
                or_dash(job.due),
                or_dash(job.fate_point),
                or_dash(job.last_claimed),
                detail,
            ]
        })
        .collect();
    table(
        &[
            "JOB",
            "STATE",
            "DUE FIRE",
            "FATE POINT",
            "LAST CLAIMED",
            "DETAIL",
        ],
        rows,
    )
}

fn history_table(entries: &[HistoryEntry]) -> String {
    let rows = entries
        .iter()
        .map(|e| {
            vec![
                time(e.fire_time),
                e.outcome.to_string(),
                e.instance.clone(),
                e.fencing_token
                    .map_or_else(|| "-".to_owned(), |t| t.to_string()),
                e.lateness.map_or_else(
                    || "-".to_owned(),
                    |l| humantime::format_duration(l).to_string(),
                ),
                e.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &["FIRE", "OUTCOME", "INSTANCE", "TOKEN", "LATENESS", "ERROR"],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_time_or_a_duration_back() {
        let now = DateTime::parse_from_rfc3339("2026-02-01T12:00:00Z")
            .expect("valid")
            .with_timezone(&Utc);
        assert_eq!(
            time(parse_since("24h", now).expect("a duration")),
            "2026-01-31T12:00:00Z"
        );
        assert_eq!(
            time(parse_since("2026-01-01T00:00:00+01:00", now).expect("a time")),
            "2025-12-31T23:00:00Z"
        );
        assert!(parse_since("yesterday", now).is_err());
    }

    #[test]
    fn tables_align_their_columns() {
        let out = table(
            &["A", "BB"],
            vec![
                vec!["long".into(), "x".into()],
                vec!["s".into(), "y".into()],
            ],
        );
        assert_eq!(out, "A     BB\nlong  x\ns     y\n");
    }
}
