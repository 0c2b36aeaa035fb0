//! Overrides of `#[scheduled]` jobs at start (docs/guide/overrides.md): `overrides.toml` beside
//! this file makes the nightly `examples::report` fire every 2 s and turns `examples::cleanup`
//! off, without touching the code. Prints each job's status with where its overridden settings
//! came from, runs the jobs for a few seconds and exits.
//!
//! ```text
//! cargo run --example overrides
//! CRONGUARD_JOB__EXAMPLES__REPORT__CRON='*/3 * * * * *' cargo run --example overrides
//! CRONGUARD_JOB__EXAMPLES__REPROT__CRON='*/3 * * * * *' cargo run --example overrides
//! ```
//!
//! The second run overrides the file's value with a variable's (which wins); the third misspells
//! the job, and `start()` fails naming the variable it meant.

use std::time::Duration;

use cronguard::{scheduled, JobContext};

/// At 03:00 in Berlin, as far as the code knows.
#[scheduled(cron = "0 0 3 * * *", tz = "Europe/Berlin", name = "examples::report")]
async fn report(ctx: JobContext) {
    println!("report for {}", ctx.fire_time());
}

/// Every second, as far as the code knows.
#[scheduled(every = "1s", name = "examples::cleanup")]
async fn cleanup() {
    println!("cleanup");
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt().with_env_filter("warn").init();

    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/overrides.toml");
    let started = cronguard::builder().overrides_file(file).start().await;
    let handle = match started {
        Ok(handle) => handle,
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    };
    for job in handle.monitor().jobs() {
        let on = if job.enabled { "on" } else { "off" };
        println!("{} ({on}): {}", job.name, job.description);
        for o in &job.overrides {
            println!("    `{}` = {:?} from {}", o.setting, o.value, o.source);
        }
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    for job in handle.monitor().jobs() {
        println!("{}: {} runs", job.name, job.counts.succeeded);
    }
    handle.shutdown().await;
}
