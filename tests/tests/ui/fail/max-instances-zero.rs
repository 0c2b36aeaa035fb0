use cronguard::scheduled;

#[scheduled(every = "30s", max_instances = 0)]
async fn tick() {}

fn main() {}
