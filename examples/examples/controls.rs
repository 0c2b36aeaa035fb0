//! Pause, resume and run now: two processes started from this program share a lock dir, so a
//! pause made in one holds for both, and a run asked for runs once. Runs for 9 seconds and exits.
//!
//! ```text
//! cargo run --example controls
//! ```

use std::time::Duration;

use cronguard::{Cronguard, EventKind, Job, Lock, Schedule};

async fn replica(name: &str, lock_dir: &std::path::Path) -> Result<Cronguard, cronguard::Error> {
    let job = Job::new(
        "settle",
        Schedule::every(Duration::from_secs(1)).expect("1 s is valid"),
    )
    .lock(Lock::File)
    .run(|ctx| async move { println!("  run {} (token {})", ctx.run_key(), ctx.fencing_token()) });
    let instance = name.to_owned();
    cronguard::builder()
        .registered_jobs(false)
        .lock_dir(lock_dir)
        .instance(name)
        .on_event(move |e| {
            if let EventKind::Skipped {
                paused: true,
                reason,
            } = &e.kind
            {
                if e.first_report {
                    println!("  {instance}: fire {} skipped: {reason}", e.run_key);
                }
            }
        })
        .job(job)
        .start()
        .await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("error").init();
    let dir = std::env::temp_dir().join(format!("cronguard-controls-{}", std::process::id()));
    let (a, b) = (replica("a", &dir).await?, replica("b", &dir).await?);
    tokio::time::sleep(Duration::from_secs(2)).await;

    println!("pausing on a");
    a.monitor().pause("settle", "example").await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!(
        "b sees: {:?}",
        b.monitor().job("settle").and_then(|j| j.paused)
    );

    println!("run now, asked on b (while paused)");
    let key = b.monitor().trigger("settle")?;
    println!("  asked for {key}");
    tokio::time::sleep(Duration::from_secs(2)).await;

    println!("resuming on b");
    b.monitor().resume("settle", "example").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    a.shutdown().await;
    b.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
