use cronguard::scheduled;

#[scheduled(cron = "0 0 L-31 * *")]
async fn month_end() {}

fn main() {}
