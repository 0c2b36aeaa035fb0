use cronguard::scheduled;

#[scheduled(every = "30s")]
async fn tick(attempt: u32) {
    let _ = attempt;
}

fn main() {}
