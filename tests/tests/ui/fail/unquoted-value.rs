use cronguard::scheduled;

#[scheduled(every = 30s, lock = redis)]
async fn tick() {}

fn main() {}
