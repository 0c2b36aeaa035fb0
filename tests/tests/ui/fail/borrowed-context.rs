use cronguard::{scheduled, JobContext};

#[scheduled(every = "30s")]
async fn tick(ctx: &JobContext) {
    let _ = ctx;
}

fn main() {}
