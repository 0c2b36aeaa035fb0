use cronguard::scheduled;

#[scheduled(every = "30s")]
struct Tick;

fn main() {}
