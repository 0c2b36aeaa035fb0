//! `lock = "redis"` without cronguard's `redis` feature is a compile error that names the feature.
//! The `.stderr` file is for rustc 1.95, the toolchain CI uses.

#[test]
fn redis_lock_without_the_feature() {
    trybuild::TestCases::new().compile_fail("tests/ui/redis-without-feature.rs");
}
