use cronguard::scheduled;

#[scheduled(every = "30s", priority = 3)]
async fn tick() {}

fn main() {}
