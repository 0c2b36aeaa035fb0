//! The pass cases of `#[cronguard::scheduled]`: every `ui/pass/*.rs` file must compile, without
//! a warning where it says `#![deny(warnings)]`, and its `main` must run to the end.
//!
//! Each file is a module of this test rather than a trybuild case: they compile with the rest of
//! the package, and the compile-fail cases (`ui.rs`) then go through trybuild in one `cargo
//! check`. trybuild builds and links each case one after the other as soon as one pass case is
//! among them.

#[path = "ui/pass/async-and-plain-functions.rs"]
mod async_and_plain_functions;
#[path = "ui/pass/callable-directly.rs"]
mod callable_directly;
#[path = "ui/pass/crate-path.rs"]
mod crate_path;
#[path = "ui/pass/cron-last-minus.rs"]
mod cron_last_minus;
#[path = "ui/pass/every-argument.rs"]
mod every_argument;
#[path = "ui/pass/limits.rs"]
mod limits;
#[path = "ui/pass/nested-module.rs"]
mod nested_module;
#[path = "ui/pass/raw-identifier.rs"]
mod raw_identifier;
#[path = "ui/pass/return-types.rs"]
// Written as some users write them (`-> ()`, a constant condition), which clippy would change.
#[allow(clippy::unused_unit, clippy::eq_op)]
mod return_types;
#[path = "ui/pass/shared-guards.rs"]
mod shared_guards;
#[path = "ui/pass/state-arguments.rs"]
mod state_arguments;
#[path = "ui/pass/via-macro-rules.rs"]
mod via_macro_rules;

#[test]
fn async_and_plain_functions_compiles_and_runs() {
    async_and_plain_functions::main();
}

#[test]
fn callable_directly_compiles_and_runs() {
    callable_directly::main();
}

#[test]
fn crate_path_compiles_and_runs() {
    crate_path::main();
}

#[test]
fn cron_last_minus_compiles_and_runs() {
    cron_last_minus::main();
}

#[test]
fn every_argument_compiles_and_runs() {
    every_argument::main();
}

#[test]
fn limits_compiles_and_runs() {
    limits::main();
}

#[test]
fn nested_module_compiles_and_runs() {
    nested_module::main();
}

#[test]
fn raw_identifier_compiles_and_runs() {
    raw_identifier::main();
}

#[test]
fn return_types_compiles_and_runs() {
    return_types::main();
}

#[test]
fn shared_guards_compiles_and_runs() {
    shared_guards::main();
}

#[test]
fn state_arguments_compiles_and_runs() {
    state_arguments::main();
}

#[test]
fn via_macro_rules_compiles_and_runs() {
    via_macro_rules::main();
}
