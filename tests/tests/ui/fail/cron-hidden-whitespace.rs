use cronguard::scheduled;

// A no-break space between the hour and day-of-month fields, as pasted from a web page.
#[scheduled(cron = "0 2 * * *")]
async fn pasted() {}

#[scheduled(cron = "0 0\n* * *")]
async fn line_break() {}

#[scheduled(cron = "0 ０ * * *")]
async fn full_width_digit() {}

fn main() {}
