use cronguard::scheduled;

// Every mistake is reported in one compile, each at its own token.
#[scheduled(
    cron = "0 */5 * * *  * * *",
    tz = "Berlin",
    lock = "file",
    lease = "10s",
    max_instances = 2,
    overlap = "drop",
    coalesce = true,
    colaesce
)]
const fn tick<T>(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
