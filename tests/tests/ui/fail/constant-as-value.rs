use cronguard::scheduled;

const INTERVAL: &str = "30s";

#[scheduled(every = INTERVAL)]
async fn tick() {}

fn main() {}
