use cronguard::scheduled;

#[scheduled(every = "30s")]
extern "C" fn tick() {}

fn main() {}
