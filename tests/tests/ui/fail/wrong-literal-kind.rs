use cronguard::scheduled;

#[scheduled(every = "30s", max_instances = "2")]
async fn tick() {}

fn main() {}
