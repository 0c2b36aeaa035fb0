//! The first example of the README: one job every 2 s with a value of the application's state,
//! and the logs that show each run. `cargo run --example hello`; stop it with Ctrl-C.

use cronguard::{scheduled, JobContext, State};

/// What the application hands its jobs: a database pool, a client, settings.
struct Greeting(&'static str);

#[scheduled(every = "2s")]
async fn hello(ctx: JobContext, greeting: State<Greeting>) -> anyhow::Result<()> {
    tracing::info!(
        fencing_token = ctx.fencing_token(),
        "{} from {}",
        greeting.0,
        ctx.run_key()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), cronguard::Error> {
    tracing_subscriber::fmt().init(); // cronguard logs every run and every dropped fire
    cronguard::builder()
        .state(Greeting("hello"))
        .start()
        .await?
        .run_until_shutdown_signal()
        .await
}
