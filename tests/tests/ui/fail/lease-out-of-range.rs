use cronguard::scheduled;

#[scheduled(every = "30s", lock = "redis", lease = "10ms")]
async fn too_short() {}

#[scheduled(every = "30s", lock = "redis", lease = "2days")]
async fn too_long() {}

fn main() {}
