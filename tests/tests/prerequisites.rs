//! Says which parts of the suite cannot run on this machine: a missing `redis-server` fails
//! this test in CI (`CI` or `CRONGUARD_TESTS_REQUIRE_REDIS` set) and is reported as `SKIPPED`
//! on the terminal elsewhere, whatever the harness captures (see "Quick start" in the README for
//! the packages to install).

#[test]
fn redis_server_for_the_redis_guard_tests() {
    let required =
        cronguard_testkit::in_ci() || std::env::var_os("CRONGUARD_TESTS_REQUIRE_REDIS").is_some();
    let installed = cronguard_testkit::require_program(
        "redis-server",
        "the tests of the Redis guard (tests/tests/redis_*.rs, the guard conformance suite)",
        "e.g. `apt-get install redis-server` or `brew install redis`",
        required,
    );
    assert!(installed || !required);
}
