//! Only the compile-fail test in `tests/` lives here.
