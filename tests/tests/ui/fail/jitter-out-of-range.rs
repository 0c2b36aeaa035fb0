use cronguard::scheduled;

#[scheduled(every = "30s", jitter = "2days")]
async fn too_long() {}

#[scheduled(every = "30s", jitter = 30)]
async fn no_unit() {}

fn main() {}
