use cronguard::scheduled;

#[scheduled(every = "30s")]
const fn tick() {}

fn main() {}
