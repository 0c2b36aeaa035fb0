use cronguard::scheduled;

#[scheduled(lock = "file")]
async fn tick() {}

fn main() {}
