use cronguard::scheduled;

#[scheduled(every = "30s", crate = "my framework::cronguard")]
async fn tick() {}

fn main() {}
