//! Which jobs this replica runs (`CRONGUARD_JOBS`, [`Builder::select_jobs`]): include and
//! exclude patterns over job names. The others are watched — listed, with health — but never
//! claimed or run here (docs/guide/selecting-jobs.md).
//!
//! [`Builder::select_jobs`]: crate::Builder::select_jobs

/// Patterns, comma separated: `billing::*` includes, `!billing::slow_*` excludes; `*` matches
/// any run of characters. A job runs when it matches an include (or there is none) and no
/// exclude.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selection {
    include: Vec<String>,
    exclude: Vec<String>,
}

impl Selection {
    pub(crate) fn parse(text: &str) -> Result<Selection, String> {
        let mut selection = Selection {
            include: Vec::new(),
            exclude: Vec::new(),
        };
        for item in text.split(',').map(str::trim) {
            let (list, pattern) = match item.strip_prefix('!') {
                Some(p) => (&mut selection.exclude, p.trim()),
                None => (&mut selection.include, item),
            };
            if pattern.is_empty() {
                return Err(format!(
                    "the job selection `{text}` has an empty pattern; write patterns separated by commas, such as `billing::*,!billing::slow_*`"
                ));
            }
            list.push(pattern.to_owned());
        }
        Ok(selection)
    }

    /// Whether this replica runs job `name`.
    pub(crate) fn runs(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| glob(p, name)))
            && !self.exclude.iter().any(|p| glob(p, name))
    }

    /// The patterns that match none of `names` (probably a typo).
    pub(crate) fn unmatched<'a>(&'a self, names: &[&str]) -> Vec<&'a str> {
        self.include
            .iter()
            .chain(&self.exclude)
            .filter(|p| !names.iter().any(|n| glob(p, n)))
            .map(String::as_str)
            .collect()
    }
}

/// `*` matches any run of characters (also none); everything else matches itself.
fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty(); // no `*`: the whole name
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_and_excludes_pick_the_jobs() {
        let s = Selection::parse("billing::*, !billing::slow_*,reports::daily").expect("valid");
        assert!(s.runs("billing::settle"));
        assert!(!s.runs("billing::slow_export"));
        assert!(s.runs("reports::daily"));
        assert!(!s.runs("reports::weekly"));
        let only_out = Selection::parse("!noisy").expect("valid");
        assert!(only_out.runs("anything"));
        assert!(!only_out.runs("noisy"));
    }

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(glob("a*c", "ac"));
        assert!(!glob("a*c", "ab"));
        assert!(!glob("ab", "abc"));
        assert!(glob("*::run", "x::y::run"));
        assert!(!glob("a*a", "a"));
    }

    #[test]
    fn an_empty_pattern_is_an_error_that_shows_the_syntax() {
        let e = Selection::parse("billing::*,,x").expect_err("empty");
        assert!(e.contains("billing::*,!billing::slow_*"), "{e}");
        assert_eq!(
            Selection::parse("a*,!b")
                .expect("valid")
                .unmatched(&["abc"]),
            ["b"]
        );
    }
}
