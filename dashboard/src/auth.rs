//! Who may read the dashboard and who may press its buttons: roles, and a ready-made check of
//! bearer or HTTP Basic tokens compared in constant time.

use std::sync::Arc;

use axum::http::{header, request::Parts, HeaderMap};
use base64::Engine as _;
use subtle::ConstantTimeEq as _;

/// What a request may do on the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// May read the pages; every POST is refused (403).
    Viewer,
    /// May read the pages and press the buttons (pause, resume, run now).
    Operator,
}

/// Who is asking, and what they may do: what an authorisation check given to
/// [`Dashboard::authorize_roles`](crate::Dashboard::authorize_roles) returns for a request it
/// accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// What the request may do.
    pub role: Role,
    /// Who is asking: recorded as who paused or resumed a job.
    pub who: String,
}

impl Access {
    /// `who` may read the pages only.
    pub fn viewer(who: impl Into<String>) -> Access {
        Access {
            role: Role::Viewer,
            who: who.into(),
        }
    }

    /// `who` may read the pages and press the buttons.
    pub fn operator(who: impl Into<String>) -> Access {
        Access {
            role: Role::Operator,
            who: who.into(),
        }
    }
}

/// An authorisation check of secret tokens, for
/// [`Dashboard::tokens`](crate::Dashboard::tokens): an operator token, and optionally a
/// read-only one.
///
/// A request shows a token as `Authorization: Bearer <token>`, or as the password of HTTP Basic
/// authentication (`Authorization: Basic`, what a browser sends after asking for a user name and
/// password; the user name is recorded as who paused a job, `operator` when empty). Tokens are
/// compared in constant time (the [`subtle`](https://docs.rs/subtle) crate), so the time of a
/// refusal does not tell how much of a guess was right; an empty token never matches.
#[derive(Clone, Default)]
pub struct Tokens {
    operator: Option<Arc<[u8]>>,
    viewer: Option<Arc<[u8]>>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        f.debug_struct("Tokens")
            .field("operator", &self.operator.is_some())
            .field("viewer", &self.viewer.is_some())
            .finish()
    }
}

/// The longest user name of Basic authentication kept as who is asking, in characters.
const WHO_CHARS: usize = 64;

impl Tokens {
    /// No token: every request is refused.
    pub fn new() -> Tokens {
        Tokens::default()
    }

    /// The token that gives [`Role::Operator`]. An empty token is ignored.
    pub fn operator(mut self, token: impl AsRef<[u8]>) -> Tokens {
        self.operator = Some(token.as_ref())
            .filter(|t| !t.is_empty())
            .map(Arc::from);
        self
    }

    /// The token that gives [`Role::Viewer`]. An empty token is ignored.
    pub fn viewer(mut self, token: impl AsRef<[u8]>) -> Tokens {
        self.viewer = Some(token.as_ref())
            .filter(|t| !t.is_empty())
            .map(Arc::from);
        self
    }

    /// What the request may do, from the token it shows; `None` when it shows none or a wrong
    /// one.
    pub fn check(&self, request: &Parts) -> Option<Access> {
        self.check_headers(&request.headers)
    }

    fn check_headers(&self, headers: &HeaderMap) -> Option<Access> {
        let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
        let (scheme, rest) = value.split_once(' ')?;
        let rest = rest.trim();
        let (user, token): (Option<String>, Vec<u8>) = if scheme.eq_ignore_ascii_case("bearer") {
            (None, rest.as_bytes().to_vec())
        } else if scheme.eq_ignore_ascii_case("basic") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .ok()?;
            let colon = decoded.iter().position(|&b| b == b':')?;
            let user = String::from_utf8_lossy(&decoded[..colon])
                .chars()
                .filter(|c| !c.is_control())
                .take(WHO_CHARS)
                .collect::<String>();
            (Some(user), decoded[colon + 1..].to_vec())
        } else {
            return None;
        };
        // Both compared whatever the first answers, so that the time does not tell which matched.
        let operator = matches(self.operator.as_deref(), &token);
        let viewer = matches(self.viewer.as_deref(), &token);
        let role = if operator {
            Role::Operator
        } else if viewer {
            Role::Viewer
        } else {
            return None;
        };
        let who = match user.filter(|u| !u.trim().is_empty()) {
            Some(user) => user,
            None if role == Role::Operator => "operator".to_owned(),
            None => "viewer".to_owned(),
        };
        Some(Access { role, who })
    }
}

/// Whether `given` is `expected`, in time that depends on their lengths only.
fn matches(expected: Option<&[u8]>, given: &[u8]) -> bool {
    expected.is_some_and(|expected| bool::from(expected.ct_eq(given)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ask(tokens: &Tokens, authorization: &str) -> Option<Access> {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(authorization).expect("a header value"),
        );
        tokens.check_headers(&headers)
    }

    #[test]
    fn bearer_and_basic_tokens_give_their_roles() {
        let tokens = Tokens::new().operator("op-secret").viewer("read-secret");
        assert_eq!(
            ask(&tokens, "Bearer op-secret"),
            Some(Access::operator("operator"))
        );
        assert_eq!(
            ask(&tokens, "bearer read-secret"),
            Some(Access::viewer("viewer"))
        );
        assert_eq!(ask(&tokens, "Bearer op-secre"), None);
        assert_eq!(ask(&tokens, "Bearer "), None);
        // alice:op-secret
        assert_eq!(
            ask(&tokens, "Basic YWxpY2U6b3Atc2VjcmV0"),
            Some(Access::operator("alice"))
        );
        // bob:nope
        assert_eq!(ask(&tokens, "Basic Ym9iOm5vcGU="), None);
        assert_eq!(ask(&tokens, "Basic !!!"), None);
        assert_eq!(ask(&tokens, "Digest op-secret"), None);
        assert_eq!(ask(&Tokens::new().operator(""), "Bearer "), None);
        assert!(!format!("{tokens:?}").contains("secret"));
    }
}
