//! What a test's `tracing` subscriber wrote, kept in memory for the test to read.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

/// Every line a test's subscriber wrote: hand a clone to the subscriber as its writer
/// (`.with_writer(move || logs.clone())`) and read the text afterwards.
#[derive(Clone, Default, Debug)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }

    /// How many lines written so far contain `text`.
    pub fn count(&self, text: &str) -> usize {
        self.text()
            .lines()
            .filter(|line| line.contains(text))
            .count()
    }
}
