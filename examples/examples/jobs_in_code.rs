//! Jobs defined in code (for schedules that come from configuration), an event hook, and the
//! status snapshot. Runs for 12 seconds and exits.

use std::time::Duration;

use cronguard::{Job, Overlap, Schedule};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("warn").init();
    // Imagine these come from a configuration file.
    let config = [("cleanup", "*/3 * * * * *"), ("digest", "*/5 * * * * *")];
    let mut builder = cronguard::builder().registered_jobs(false);
    for (name, cron) in config {
        let job = Job::new(name, Schedule::cron(cron, "Europe/Berlin")?)
            .overlap(Overlap::Queue)
            .run(move |ctx| async move {
                println!(
                    "{name}: run {} (token {})",
                    ctx.run_key(),
                    ctx.fencing_token()
                );
            });
        builder = builder.job(job);
    }
    let handle = builder
        .on_event(|event| println!("  event: {} {}", event.kind.name(), event.run_key))
        .start()
        .await?;
    tokio::time::sleep(Duration::from_secs(12)).await;
    for job in handle.monitor().jobs() {
        println!(
            "{}: {} runs succeeded, next fire {:?}",
            job.name, job.counts.succeeded, job.next_fire
        );
    }
    handle.shutdown().await;
    Ok(())
}
