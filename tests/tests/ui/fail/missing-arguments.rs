use cronguard::scheduled;

#[scheduled]
async fn tick() {}

fn main() {}
