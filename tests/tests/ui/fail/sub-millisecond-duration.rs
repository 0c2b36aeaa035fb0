use cronguard::scheduled;

#[scheduled(every = "500us", misfire_grace = "1500us")]
async fn tick() {}

fn main() {}
