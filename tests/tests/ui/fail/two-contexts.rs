use cronguard::{scheduled, JobContext};

#[scheduled(every = "30s")]
async fn tick(ctx: JobContext, again: JobContext) {
    let _ = (ctx, again);
}

fn main() {}
