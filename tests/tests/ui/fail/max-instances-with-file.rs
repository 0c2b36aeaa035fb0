use cronguard::scheduled;

#[scheduled(every = "30s", lock = "file", max_instances = 2)]
async fn tick() {}

fn main() {}
