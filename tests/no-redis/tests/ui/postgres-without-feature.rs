#[cronguard::scheduled(every = "1s", lock = "postgres")]
async fn settle() {}

fn main() {}
