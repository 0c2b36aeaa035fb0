use cronguard::scheduled;

#[scheduled(every = "30s", overlap = "queued")]
async fn tick() {}

fn main() {}
