// Generated code must not trip these in a user's crate.
#![forbid(unsafe_code)]
#![deny(warnings)]

mod billing {
    pub mod nightly {
        use cronguard::{scheduled, JobContext};

        #[scheduled(cron = "0 0 2 * * *", tz = "UTC")]
        pub(crate) async fn settle(ctx: JobContext) -> anyhow::Result<()> {
            let _ = ctx;
            Ok(())
        }

        #[scheduled(every = "10m", lock = "file")]
        fn private_cleanup() {}
    }
}

pub(crate) fn main() {
    // A job inside a function body works too.
    #[cronguard::scheduled(every = "5s")]
    fn local_job() {}

    let _ = billing::nightly::settle;
    local_job();
}
