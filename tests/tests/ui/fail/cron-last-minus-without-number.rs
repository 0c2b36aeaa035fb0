use cronguard::scheduled;

#[scheduled(cron = "0 0 1,L- * *")]
async fn month_end() {}

fn main() {}
