use cronguard::scheduled;

#[scheduled(every = "1h", tz = "Europe/Berlin")]
async fn tick() {}

fn main() {}
