//! Jobs from a TOML file: each `[[job]]` table holds the arguments of `#[scheduled]` and goes
//! through the same checks (docs/guide/attribute.md). Prints each job in words with
//! its next fires, shows what a mistake in the file looks like, then runs the jobs for a few
//! seconds and exits.

use std::time::Duration;

use chrono::Utc;
use cronguard::{JobConfig, JobConfigError};

/// The file's shape: a list of `[[job]]` tables.
#[derive(serde::Deserialize)]
struct JobsFile {
    job: Vec<JobConfig>,
}

/// Reads the jobs, checking every one and reporting every problem of the file at once.
fn read_jobs(text: &str) -> Result<Vec<cronguard::Job>, Vec<String>> {
    let file: JobsFile = toml::from_str(text).map_err(|e| vec![e.to_string()])?;
    let mut problems = Vec::new();
    let mut jobs = Vec::new();
    for config in file.job {
        match config.into_job() {
            Ok(job) => jobs.push(job),
            Err(error) => problems.push(JobConfigError::to_string(&error)),
        }
    }
    if problems.is_empty() {
        Ok(jobs)
    } else {
        Err(problems)
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("warn").init();

    let jobs = read_jobs(include_str!("jobs.toml")).map_err(|problems| problems.join("\n"))?;
    let now = Utc::now();
    for job in &jobs {
        let schedule = job.schedule();
        let next: Vec<String> = schedule
            .fires_after(now)
            .take(2)
            .map(|t| t.to_rfc3339())
            .collect();
        println!("{}: {}", job.name(), schedule.describe());
        println!("    next {}", next.join(", "));
        if let Some(last) = schedule.previous_before(now) {
            println!("    last {}", last.to_rfc3339());
        }
    }

    // A file with mistakes: every one is reported, a cron expression's with its position.
    let broken = r#"
        [[job]]
        name = "reports::nightly"
        cron = "0 30 2 L-31 * *"
        lock = "redsi"
        lease = "10s"
    "#;
    if let Err(problems) = read_jobs(broken) {
        println!("\na broken file is rejected:\n{}\n", problems.join("\n"));
    }

    let mut builder = cronguard::builder().registered_jobs(false);
    for job in jobs {
        let name = job.name().to_owned();
        builder = builder.job(job.run(move |ctx| {
            let name = name.clone();
            async move { println!("{name}: run {}", ctx.run_key()) }
        }));
    }
    let handle = builder.start().await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    for status in handle.monitor().jobs() {
        println!(
            "{}: {} ({} runs)",
            status.name, status.description, status.counts.succeeded
        );
    }
    handle.shutdown().await;
    Ok(())
}
