use cronguard::scheduled;

#[scheduled(every = "30s")]
fn tick<'a>() -> Result<(), &'a str> {
    Ok(())
}

fn main() {}
