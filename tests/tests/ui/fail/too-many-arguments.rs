use cronguard::{scheduled, JobContext};

#[scheduled(every = "30s")]
async fn tick(ctx: JobContext, retries: u32) {
    let _ = (ctx, retries);
}

fn main() {}
