use cronguard::scheduled;

#[scheduled(every = "30s", retries = 3)]
async fn tick() {}

fn main() {}
