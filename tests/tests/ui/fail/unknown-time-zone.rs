use cronguard::scheduled;

#[scheduled(cron = "0 0 9 * * *", tz = "Europe/Berln")]
async fn tick() {}

fn main() {}
