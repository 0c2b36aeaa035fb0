use cronguard::{scheduled, JobContext};

struct Billing;

impl Billing {
    #[scheduled(every = "30s")]
    fn settle(&self, ctx: JobContext) {
        let _ = ctx;
    }
}

fn main() {}
