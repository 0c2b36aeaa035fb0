#[cronguard::scheduled(every = "1s", lock = "redis")]
async fn settle() {}

fn main() {}
