use cronguard::scheduled;

#[scheduled(every = "30s", jitter = "30s")]
async fn as_long_as_the_interval() {}

fn main() {}
