use cronguard::scheduled;

#[scheduled(every = "30s")]
fn r#match() {}

#[scheduled(every = "30s")]
async fn r#async() {}

pub(crate) fn main() {
    r#match();
}
