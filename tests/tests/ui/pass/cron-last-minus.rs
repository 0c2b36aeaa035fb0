use cronguard::scheduled;

#[scheduled(cron = "0 0 L-3 * *")]
async fn three_days_before_month_end() {}

#[scheduled(cron = "0 0 L-3,L * *", tz = "Europe/Berlin")]
async fn list_with_last() {}

#[scheduled(cron = "0 0 1,L-1 * MON")]
async fn or_with_weekday() {}

#[scheduled(cron = "0 0 l-30 * *")]
async fn thirty_days_before() {}

#[scheduled(cron = "\t0 0 L-0 * *\t")]
async fn tabs_around() {}

pub(crate) fn main() {}
