//! Says which parts of the suite cannot run on this machine: a missing `redis-server`,
//! PostgreSQL or PgBouncer fails this test in CI (`CI`, `CRONGUARD_TESTS_REQUIRE_REDIS` or
//! `CRONGUARD_TESTS_REQUIRE_POSTGRES` set) and is reported as `SKIPPED`
//! on the terminal elsewhere, whatever the harness captures (CONTRIBUTING.md lists
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

#[test]
fn postgresql_for_the_postgres_guard_tests() {
    let required = cronguard_testkit::in_ci()
        || std::env::var_os("CRONGUARD_TESTS_REQUIRE_POSTGRES").is_some();
    // `PostgresServer::start` finds `initdb` on the PATH or under /usr/lib/postgresql, and says
    // itself what to install when it cannot.
    let started = cronguard_testkit::PostgresServer::start();
    assert!(started.is_some() || !required);
    if let Some(server) = started {
        assert!(cronguard_testkit::PgBouncer::start(&server).is_some() || !required);
    }
}
