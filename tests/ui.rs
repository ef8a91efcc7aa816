//! Compile-fail tests: one case per mistake a user can make with `#[optiml::kernel]`, each with the exact
//! message and span rustc shows (`tests/ui/*.stderr`). Refresh with `TRYBUILD=overwrite cargo test --test ui`
//! and review the diff.

#[test]
fn every_user_error_has_a_spanned_message() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
