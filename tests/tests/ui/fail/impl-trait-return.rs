use cronguard::scheduled;

#[scheduled(every = "30s")]
async fn tick() -> impl Sized {}

fn main() {}
