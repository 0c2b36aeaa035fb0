//! Settings from the environment: every `CRONGUARD_*` variable is read through here.

#[cfg(any(feature = "redis", feature = "postgres"))]
use std::path::Path;

/// The variable `name`, unless it is unset or blank.
pub(crate) fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The URL of a store as the environment gives it: `var` (`CRONGUARD_REDIS_URL`), else the
/// contents of the file that `<var>_FILE` names (the convention of Docker and Kubernetes
/// secrets), else `fallback` (`REDIS_URL`); `None` when none is set.
///
/// # Errors
///
/// Both `var` and `<var>_FILE` are set, or the file cannot be read, is empty or holds more than
/// one line. The message names the variable and says what to change.
#[cfg(any(feature = "redis", feature = "postgres"))]
pub(crate) fn url(var_name: &str, fallback: &str) -> Result<Option<String>, String> {
    url_in(&var, var_name, fallback)
}

/// [`url`], with the variables of `env`.
#[cfg(any(feature = "redis", feature = "postgres"))]
fn url_in(
    env: &dyn Fn(&str) -> Option<String>,
    var_name: &str,
    fallback: &str,
) -> Result<Option<String>, String> {
    let var = env;
    let file_var = format!("{var_name}_FILE");
    match (var(var_name), var(&file_var)) {
        (Some(_), Some(_)) => Err(format!(
            "both `{var_name}` and `{file_var}` are set; set one of them (`{file_var}` names a file that holds the URL)"
        )),
        (Some(url), None) => Ok(Some(url)),
        (None, Some(path)) => url_file(Path::new(&path), &file_var).map(Some),
        (None, None) => Ok(var(fallback)),
    }
}

/// The URL held by the file at `path`, which `what` names (a variable, a flag): its contents
/// without the surrounding whitespace (the trailing newline of a file written by an editor or
/// `echo`).
///
/// # Errors
///
/// The file cannot be read, is empty, or holds more than one line.
#[cfg(any(feature = "redis", feature = "postgres"))]
pub(crate) fn url_file(path: &Path, what: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "cannot read the URL file `{}` of `{what}`: {e}",
            path.display()
        )
    })?;
    let url = text.trim();
    if url.is_empty() {
        return Err(format!(
            "the URL file `{}` of `{what}` is empty; write the store's URL in it",
            path.display()
        ));
    }
    if url.contains(['\n', '\r']) {
        return Err(format!(
            "the URL file `{}` of `{what}` holds more than one line; write only the store's URL in it",
            path.display()
        ));
    }
    Ok(url.to_owned())
}

#[cfg(all(test, any(feature = "redis", feature = "postgres")))]
mod tests {
    use super::*;

    #[test]
    fn a_url_file_is_read_without_its_trailing_newline() {
        let dir = std::env::temp_dir().join(format!("cronguard-url-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let file = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("writes");
            path
        };
        assert_eq!(
            url_file(&file("ok", "redis://:s3cret@host:6379/0\n"), "X_FILE").as_deref(),
            Ok("redis://:s3cret@host:6379/0")
        );
        let empty = url_file(&file("empty", " \n"), "X_FILE").expect_err("empty");
        assert!(
            empty.contains("is empty") && empty.contains("X_FILE"),
            "{empty}"
        );
        let two = url_file(&file("two", "redis://a\nredis://b\n"), "X_FILE").expect_err("two");
        assert!(two.contains("more than one line"), "{two}");
        let missing = url_file(&dir.join("missing"), "X_FILE").expect_err("missing");
        assert!(missing.contains("cannot read the URL file"), "{missing}");

        // `X_URL`, else the file of `X_URL_FILE`, else `URL`; `X_URL` and its twin: an error.
        let secret = file("secret", "redis://:from-file@host\n");
        let secret = secret.display().to_string();
        let read = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            url_in(
                &|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
                "X_URL",
                "URL",
            )
        };
        assert_eq!(read(&[]), Ok(None));
        assert_eq!(
            read(&[("URL", "redis://generic")]),
            Ok(Some("redis://generic".to_owned()))
        );
        assert_eq!(
            read(&[("URL", "redis://generic"), ("X_URL_FILE", &secret)]),
            Ok(Some("redis://:from-file@host".to_owned()))
        );
        assert_eq!(
            read(&[("URL", "redis://generic"), ("X_URL", "redis://own")]),
            Ok(Some("redis://own".to_owned()))
        );
        let both = read(&[("X_URL", "redis://own"), ("X_URL_FILE", &secret)]).expect_err("both");
        assert!(both.contains("both `X_URL` and `X_URL_FILE`"), "{both}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
