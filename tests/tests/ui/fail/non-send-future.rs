use std::rc::Rc;

use cronguard::scheduled;

async fn yield_now() {}

#[scheduled(every = "30s")]
async fn tick() {
    let counter = Rc::new(1);
    yield_now().await;
    let _ = counter;
}

fn main() {}
