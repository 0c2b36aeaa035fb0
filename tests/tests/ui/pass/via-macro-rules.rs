// Arguments that arrive through `macro_rules!` fragments are read like literals.
macro_rules! every_job {
    ($name:ident, $interval:literal) => {
        #[cronguard::scheduled(every = $interval)]
        fn $name() {}
    };
}

every_job!(fast, "1s");
every_job!(slow, "1h");

pub(crate) fn main() {}
