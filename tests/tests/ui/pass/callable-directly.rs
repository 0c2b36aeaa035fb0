use cronguard::scheduled;

#[scheduled(every = "30s")]
fn add_one_and_report() -> Result<(), String> {
    Ok(())
}

#[scheduled(every = "30s", name = "counter")]
async fn async_job() -> anyhow::Result<()> {
    Ok(())
}

#[scheduled(every = "30s")]
fn plain_job() {}

#[tokio::main(flavor = "current_thread")]
pub(crate) async fn main() {
    // The attribute keeps the function as written: tests can call it directly.
    assert_eq!(add_one_and_report(), Ok(()));
    assert!(async_job().await.is_ok());
    plain_job();
}
