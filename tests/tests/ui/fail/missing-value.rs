use cronguard::scheduled;

#[scheduled(every = "30s", lock)]
async fn tick() {}

fn main() {}
