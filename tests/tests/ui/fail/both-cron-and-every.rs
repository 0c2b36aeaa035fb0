use cronguard::scheduled;

#[scheduled(cron = "0 */5 * * * *", every = "5m")]
async fn tick() {}

fn main() {}
