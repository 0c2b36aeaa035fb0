//! The errors `cronguard` returns to its user.

use std::fmt;

/// Why the scheduler could not start or run.
///
/// Its `Debug` form is its message, so that `fn main() -> Result<(), cronguard::Error>` prints
/// the problems readably.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The settings or the jobs have problems; every one is listed, each saying how to fix it.
    #[error("cronguard cannot start:{}", Bullets(problems))]
    Config {
        /// One line per problem.
        problems: Vec<String>,
    },
    /// Listening for SIGINT/SIGTERM failed.
    #[error("cronguard cannot listen for shutdown signals: {0}")]
    Signal(#[source] std::io::Error),
}

struct Bullets<'a>(&'a [String]);

impl fmt::Display for Bullets<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in self.0 {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
