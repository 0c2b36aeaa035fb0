use cronguard::scheduled;

#[scheduled(every = "0s")]
async fn tick() {}

fn main() {}
