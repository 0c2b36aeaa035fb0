use cronguard::scheduled;

#[scheduled(every = "30s", backoff = "10s")]
async fn no_retries() {}

fn main() {}
