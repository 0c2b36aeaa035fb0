//! Application state handed to jobs: values given to [`Builder::state`](crate::Builder::state),
//! one per type, which a job receives as a [`State<T>`] argument or through
//! [`JobContext::state`](crate::JobContext::state).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A value of the application's state, shared by every run that asks for it.
///
/// A `#[scheduled]` function receives it as an extra argument (after or before its
/// [`JobContext`](crate::JobContext), in any order), a job built in code through
/// [`JobContext::state`](crate::JobContext::state). The value is given once, to
/// [`Builder::state`](crate::Builder::state); a job that asks for a type that was never given
/// makes [`Builder::start`](crate::Builder::start) fail with an error naming the job and the
/// type, so a missing value is found at start, never at a fire.
///
/// `State<T>` dereferences to `T` (its field is private, so that `state.0` reaches the field
/// of a `T` that is a tuple struct), and is cheap to clone (an [`Arc`]). Tests build one with
/// [`State::new`] or from an `Arc` and pass it to the job function directly.
///
/// ```
/// use cronguard::{scheduled, JobContext, State};
///
/// struct Db {
///     url: String,
/// }
///
/// #[scheduled(every = "1m")]
/// async fn vacuum(ctx: JobContext, db: State<Db>) {
///     println!("vacuuming {} for {}", db.url, ctx.run_key());
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), cronguard::Error> {
/// let handle = cronguard::builder()
///     .state(Db { url: "postgres://localhost/app".to_owned() })
///     .start()
///     .await?;
/// # handle.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct State<T: ?Sized>(Arc<T>);

impl<T> State<T> {
    /// Wraps a value, for calling a job function directly (in a test).
    pub fn new(value: T) -> Self {
        State(Arc::new(value))
    }
}

impl<T: ?Sized> State<T> {
    /// The shared value, for keeping it beyond the run.
    pub fn into_arc(self) -> Arc<T> {
        self.0
    }
}

impl<T: ?Sized> Clone for State<T> {
    fn clone(&self) -> Self {
        State(Arc::clone(&self.0))
    }
}

impl<T: ?Sized> Deref for State<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized> From<Arc<T>> for State<T> {
    fn from(value: Arc<T>) -> Self {
        State(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for State<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("State").field(&&*self.0).finish()
    }
}

/// A job asked for a state type that was never given to
/// [`Builder::state`](crate::Builder::state) (or to
/// [`JobContextBuilder::state`](crate::JobContextBuilder::state) in a test).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingState {
    type_name: &'static str,
}

impl MissingState {
    /// The name of the type that was asked for.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }
}

impl fmt::Display for MissingState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no state of type `{}` was given; pass one to `Builder::state` before `start()`",
            self.type_name
        )
    }
}

impl std::error::Error for MissingState {}

/// A state type a job needs: its id and its name (for messages).
#[derive(Clone, Copy)]
pub struct StateKey {
    pub(crate) id: TypeId,
    pub(crate) name: &'static str,
}

impl StateKey {
    /// The key of `T`.
    pub fn of<T: ?Sized + 'static>() -> StateKey {
        StateKey {
            id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
        }
    }

    /// The type's name.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }
}

impl fmt::Debug for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for StateKey {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

/// Every state value, by type.
#[derive(Clone, Default)]
pub(crate) struct States {
    values: HashMap<TypeId, (Arc<dyn Any + Send + Sync>, &'static str)>,
}

impl States {
    /// Adds (or replaces) the value of type `T`.
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        let key = StateKey::of::<T>();
        self.values.insert(key.id, (Arc::new(value), key.name));
    }

    pub(crate) fn contains(&self, key: &StateKey) -> bool {
        self.values.contains_key(&key.id)
    }

    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Result<State<T>, MissingState> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|(value, _)| Arc::clone(value).downcast::<T>().ok())
            .map(State)
            .ok_or(MissingState {
                type_name: std::any::type_name::<T>(),
            })
    }
}

impl fmt::Debug for States {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.values.values().map(|(_, name)| *name).collect();
        names.sort_unstable();
        f.debug_set().entries(names).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_by_type_and_a_missing_one_is_named() {
        let mut states = States::default();
        states.insert(7_u32);
        states.insert(String::from("a"));
        states.insert(String::from("b"));
        assert_eq!(*states.get::<u32>().expect("given"), 7);
        assert_eq!(*states.get::<String>().expect("given"), "b", "replaced");
        let missing = states.get::<u64>().expect_err("never given");
        assert_eq!(missing.type_name(), "u64");
        assert!(missing.to_string().contains("`u64`"), "{missing}");
        assert_eq!(format!("{states:?}"), r#"{"alloc::string::String", "u32"}"#);
    }
}
