//! The processes present at each shared store, as the reader of its control feed last heard
//! them, so that each shared job knows whether this process claims its fires first
//! (docs/design/standby.md).

use std::sync::{Arc, PoisonError, RwLock};

use crate::model::spread::Present;

/// This process's id at the stores, and who it last heard present at each.
pub(crate) struct Presence {
    me: Arc<str>,
    /// By guard kind (`file`, `redis`, `postgres`): a handful, so a list.
    heard: RwLock<Vec<(&'static str, Present)>>,
}

impl Presence {
    /// The presence of a process of `instance`: its id is the instance, the operating system's
    /// process id and a random part, so that two processes of one instance name (two on one host,
    /// or a restart) are two processes.
    pub(crate) fn new(instance: &str) -> Self {
        Presence {
            me: Arc::from(format!(
                "{instance} {} {:016x}",
                std::process::id(),
                fastrand::u64(..)
            )),
            heard: RwLock::new(Vec::new()),
        }
    }

    /// This process's id at the stores.
    pub(crate) fn me(&self) -> &str {
        &self.me
    }

    /// The processes the store of guard `kind` lists as present (this one included or not), or
    /// `None` when the store could not tell: its jobs then stand by as if alone with the guard's
    /// answers (docs/design/standby.md).
    pub(crate) fn heard(&self, kind: &'static str, listed: Option<&[String]>) {
        let present = listed.map(|all| Present::new(&self.me, all));
        let mut heard = self.heard.write().unwrap_or_else(PoisonError::into_inner);
        heard.retain(|(k, _)| *k != kind);
        if let Some(present) = present {
            heard.push((kind, present));
        }
    }

    /// Whether this process claims the fires of `job` (guarded by kind `kind`) first, if known.
    pub(crate) fn first_here(&self, kind: &str, job: &str) -> Option<bool> {
        let heard = self.heard.read().unwrap_or_else(PoisonError::into_inner);
        heard
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, present)| present.first_here(job))
    }

    /// How many processes the store of guard `kind` lists as present, if known.
    pub(crate) fn count(&self, kind: &str) -> Option<usize> {
        let heard = self.heard.read().unwrap_or_else(PoisonError::into_inner);
        heard
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, present)| present.count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_first_here_for_one_of_two_processes_and_unknown_without_word() {
        let a = Presence::new("a");
        let b = Presence::new("a");
        assert_ne!(a.me(), b.me(), "two processes of one instance are two");
        assert_eq!(a.first_here("redis", "job"), None);
        let both = [a.me().to_owned(), b.me().to_owned()];
        a.heard("redis", Some(&both));
        b.heard("redis", Some(&both));
        assert_eq!(a.count("redis"), Some(2));
        assert_eq!(a.first_here("postgres", "job"), None);
        let firsts = (0..100)
            .filter(|i| {
                let job = format!("job-{i}");
                let (x, y) = (a.first_here("redis", &job), b.first_here("redis", &job));
                assert_ne!(x, y);
                x == Some(true)
            })
            .count();
        assert!((30..=70).contains(&firsts), "{firsts} of 100");
        a.heard("redis", None);
        assert_eq!(a.first_here("redis", "job"), None);
    }
}
