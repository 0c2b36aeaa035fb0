use cronguard::scheduled;

struct NotDisplay;

#[scheduled(every = "30s")]
fn tick() -> Result<(), NotDisplay> {
    Ok(())
}

fn main() {}
