use cronguard::scheduled;

#[scheduled(every = "30 seconds please")]
async fn tick() {}

fn main() {}
