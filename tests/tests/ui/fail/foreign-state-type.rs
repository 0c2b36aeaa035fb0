use cronguard::scheduled;

/// Not cronguard's `State`: the macro recognises the name, the compiler checks the type.
struct State<T>(T);

#[scheduled(every = "30s")]
async fn tick(db: State<u32>) {
    let _ = db.0;
}

fn main() {}
