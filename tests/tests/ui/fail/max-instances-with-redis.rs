use cronguard::scheduled;

#[scheduled(every = "30s", lock = "redis", max_instances = 4)]
async fn tick() {}

fn main() {}
