//! `lock = "redis"` and `lock = "postgres"` without the cronguard feature of that name are compile
//! errors that name the feature.
//! The `.stderr` file is for rustc 1.95, the toolchain CI uses.

#[test]
fn redis_lock_without_the_feature() {
    trybuild::TestCases::new().compile_fail("tests/ui/redis-without-feature.rs");
}

#[test]
fn postgres_lock_without_the_feature() {
    trybuild::TestCases::new().compile_fail("tests/ui/postgres-without-feature.rs");
}
