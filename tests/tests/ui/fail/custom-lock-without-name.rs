use cronguard::scheduled;

#[scheduled(every = "30s", lock = "custom:")]
async fn tick() {}

fn main() {}
