use cronguard::scheduled;

#[scheduled(every = "30s", retries = 1000)]
async fn too_many() {}

#[scheduled(every = "30s", retries = -1)]
async fn negative() {}

#[scheduled(every = "30s", retries = 3, backoff = "2h")]
async fn backoff_too_long() {}

fn main() {}
