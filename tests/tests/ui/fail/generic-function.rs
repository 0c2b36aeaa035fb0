use cronguard::scheduled;

#[scheduled(every = "30s")]
async fn tick<T: Default>() {
    let _ = T::default();
}

fn main() {}
