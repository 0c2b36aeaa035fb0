use cronguard::scheduled;

#[scheduled(every = "30s", leese = "10s")]
async fn tick() {}

fn main() {}
