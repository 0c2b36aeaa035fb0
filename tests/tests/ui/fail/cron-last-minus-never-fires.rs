use cronguard::scheduled;

// February has at most 29 days: 29 days before its last day is never in February.
#[scheduled(cron = "0 0 L-29 2 *")]
async fn february() {}

fn main() {}
