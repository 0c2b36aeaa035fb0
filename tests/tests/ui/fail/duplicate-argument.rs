use cronguard::scheduled;

#[scheduled(every = "30s", lock = "file", lock = "redis")]
async fn tick() {}

fn main() {}
