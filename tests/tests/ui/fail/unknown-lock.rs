use cronguard::scheduled;

#[scheduled(every = "30s", lock = "etcd")]
async fn tick() {}

fn main() {}
