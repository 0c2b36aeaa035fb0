use cronguard::scheduled;

#[scheduled(cron = "*/15 * * * *", jitter = "20m")]
async fn longer_than_a_quarter_hour() {}

fn main() {}
