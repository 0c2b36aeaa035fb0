use cronguard::scheduled;

#[scheduled(every = "30s", coalesce = true)]
async fn tick() {}

fn main() {}
