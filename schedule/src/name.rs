//! Job names, checked the same way by the `#[scheduled]` macro and by `cronguard::Job`.

/// Checks a job name: ASCII letters, digits, `_`, `-`, `.` and `:`: it names lock files and Redis keys
/// (where `/`, `{` and `}` would change their meaning), and `::` keeps module paths readable.
///
/// # Errors
///
/// A message that says what is wrong and what is allowed.
pub fn validate_job_name(name: &str) -> Result<(), String> {
    const ALLOWED: &str =
        "a job name may use ASCII letters, digits, `_`, `-`, `.` and `:` (it names lock files and Redis keys)";
    if name.is_empty() {
        return Err(
            "the job name is empty; give a name such as `name = \"billing::settle_orders\"`, or remove `name` to use `module_path::fn_name`".to_owned(),
        );
    }
    let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
    else {
        return Ok(());
    };
    let what = if bad.is_whitespace() {
        "whitespace".to_owned()
    } else if bad.is_control() {
        format!("the control character `{}`", bad.escape_default())
    } else {
        format!("`{bad}`")
    };
    Err(format!(
        "invalid job name `{}`: it contains {what}; {ALLOWED}",
        name.escape_debug()
    ))
}
