use cronguard::{scheduled, JobContext};

#[scheduled(cron = "0 30 2 * * *", lock = "postgres", lease = "30s", history)]
async fn nightly(ctx: JobContext) -> Result<(), std::io::Error> {
    let _ = ctx.fencing_token();
    Ok(())
}

#[scheduled(every = "10s", lock = "custom:etcd", lease = "5s")]
fn sync_inventory() {}

pub(crate) fn main() {}
