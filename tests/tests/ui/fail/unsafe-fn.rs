use cronguard::scheduled;

#[scheduled(every = "30s")]
unsafe fn tick() {}

fn main() {}
