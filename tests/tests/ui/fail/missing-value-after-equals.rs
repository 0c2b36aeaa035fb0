use cronguard::scheduled;

#[scheduled(cron =)]
async fn tick() {}

fn main() {}
