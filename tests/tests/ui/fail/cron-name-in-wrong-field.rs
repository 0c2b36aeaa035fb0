use cronguard::scheduled;

// `MON` is a day of the week, not a month.
#[scheduled(cron = "0 0 9 * MON *")]
async fn tick() {}

fn main() {}
