//! Settings from the environment: every `CRONGUARD_*` variable is read through here.

/// The variable `name`, unless it is unset or blank.
pub(crate) fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}
