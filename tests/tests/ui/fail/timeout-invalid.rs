use cronguard::scheduled;

#[scheduled(every = "30s", timeout = "0s")]
async fn zero() {}

#[scheduled(every = "30s", timeout = "soon")]
async fn unparsable() {}

#[scheduled(every = "30s", timeout = "30d")]
async fn too_long() {}

fn main() {}
