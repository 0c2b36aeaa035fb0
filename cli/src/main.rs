//! `cronguard`: lists, pauses, resumes, runs now and reads the history of the jobs of a shared
//! guard's store (a lock dir, Redis, PostgreSQL) without running them, through
//! `cronguard::admin`, the code the replicas use (README, "The command-line tool").
//!
//! Exit status: 0 when the request was carried out, 1 with the reason on stderr otherwise.

use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Parser, Subcommand};
use cronguard::admin::{Store, StoredJob};
use cronguard::history::HistoryEntry;

/// Operate the jobs of a cronguard store: the replicas see every change within about a second.
#[derive(Debug, Parser)]
#[command(name = "cronguard", version)]
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
    /// The PostgreSQL of `lock = "postgres"` jobs [env: CRONGUARD_POSTGRES_URL]
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

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            return if usage {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&e),
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&*e),
    }
}

/// Prints `e` with its causes on stderr.
fn fail(e: &dyn std::error::Error) -> ExitCode {
    let mut text = format!("cronguard: {e}");
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    eprintln!("{text}");
    ExitCode::FAILURE
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

async fn run(cli: Cli) -> Result<(), Failure> {
    let store = open(&cli.store).await?;
    match cli.command {
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
    Ok(())
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
