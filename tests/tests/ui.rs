//! Compile-fail tests of `#[cronguard::scheduled]` (the pass cases are `ui_pass.rs`).
//!
//! Every `ui/fail/*.rs` file holds one mistake and must fail to compile with exactly the messages in
//! its `.stderr` file.
//!
//! The `.stderr` files are written for **rustc 1.95** (the toolchain this repository is developed
//! with). Compiler output drifts between releases, so on another toolchain these tests may fail
//! with differences in rustc's own wording or layout, not in the macro's messages. To update them:
//!
//! ```text
//! TRYBUILD=overwrite cargo test -p cronguard-tests --test ui
//! ```
//!
//! then read every changed `.stderr` as a user would: a message you would not want to read is a bug.

use std::process::Command;

/// The toolchain the `.stderr` files were generated with.
const PINNED_RUSTC: &str = "rustc 1.95.";

#[test]
fn compile_fail() {
    if rustc_version().starts_with(PINNED_RUSTC) {
        trybuild::TestCases::new().compile_fail("tests/ui/fail/*.rs");
    } else {
        eprintln!(
            "skipping compile-fail tests: their .stderr files are for {PINNED_RUSTC}x, this is {}",
            rustc_version()
        );
    }
}

fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    Command::new(rustc)
        .arg("--version")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_default()
}
