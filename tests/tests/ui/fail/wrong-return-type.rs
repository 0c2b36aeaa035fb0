use cronguard::scheduled;

#[scheduled(every = "30s")]
async fn tick() -> u32 {
    42
}

fn main() {}
