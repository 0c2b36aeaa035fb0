use cronguard::scheduled;

#[scheduled(every = "30s", name = "billing/settle orders")]
async fn first() {}

#[scheduled(every = "30s", name = "")]
async fn second() {}

fn main() {}
