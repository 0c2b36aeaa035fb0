use cronguard::scheduled;

#[scheduled("0 */5 * * * *")]
async fn tick() {}

fn main() {}
