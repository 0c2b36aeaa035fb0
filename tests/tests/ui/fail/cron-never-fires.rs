use cronguard::scheduled;

// February never has a 30th.
#[scheduled(cron = "0 0 30 2 *")]
async fn tick() {}

fn main() {}
