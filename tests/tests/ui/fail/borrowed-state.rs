use cronguard::{scheduled, State};

struct Db;

#[scheduled(every = "30s")]
async fn tick(db: &State<Db>) {
    let _ = db;
}

fn main() {}
