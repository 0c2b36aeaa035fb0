//! `crate = "..."` for a framework that re-exports cronguard under another path.

mod framework {
    pub use ::cronguard as scheduler;
}

#[framework::scheduler::scheduled(every = "30s", lock = "redis", crate = "framework::scheduler")]
async fn tick(ctx: framework::scheduler::JobContext) {
    let _ = ctx;
}

#[framework::scheduler::scheduled(every = "30s", crate = "crate::crate_path::framework::scheduler")]
fn plain(state: framework::scheduler::State<u8>) {
    let _ = state;
}

pub(crate) fn main() {}
