use cronguard::scheduled;

#[scheduled(cron = "0 */5 * * * * * *")]
async fn tick() {}

fn main() {}
