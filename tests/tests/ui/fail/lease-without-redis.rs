use cronguard::scheduled;

#[scheduled(every = "30s", lock = "file", lease = "10s")]
async fn tick() {}

fn main() {}
