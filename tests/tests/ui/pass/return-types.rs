use std::fmt;

use cronguard::scheduled;

#[scheduled(every = "1s")]
fn unit() {}

#[scheduled(every = "1s")]
fn explicit_unit() -> () {}

#[scheduled(every = "1s")]
async fn string_error() -> Result<(), String> {
    Ok(())
}

#[scheduled(every = "1s")]
async fn anyhow_alias() -> anyhow::Result<()> {
    anyhow::ensure!(1 + 1 == 2, "arithmetic is broken");
    Ok(())
}

#[scheduled(every = "1s")]
fn boxed_error() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    Ok(())
}

#[derive(Debug)]
struct MyError;

impl fmt::Display for MyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("my error")
    }
}

type JobResult = Result<(), MyError>;

#[scheduled(every = "1s")]
fn own_alias() -> JobResult {
    Err(MyError)
}

pub(crate) fn main() {}
