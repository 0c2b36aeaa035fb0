use cronguard::scheduled;

#[scheduled(every = "30s", lock = "file", history)]
async fn tick() {}

fn main() {}
