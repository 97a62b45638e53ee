//! `cudaleak env --names`: the names the shim, the CLI and the Python package share, printed
//! from the format crate without a shim to find (the package reads them so).

mod common;

use predicates::prelude::*;

use common::bin;

#[test]
fn env_names_prints_the_shared_names_without_a_shim() {
    let out = bin()
        .args(["env", "--names"])
        .env("CUDALEAK_SHIM", "/nonexistent/libcudaleak.so")
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let names: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(names["variables"]["output"], "CUDALEAK_OUTPUT");
    assert_eq!(names["exports"]["attach"], "cudaleak_attach");
    assert_eq!(names["libraries"]["attach"], "libcudaleak-attach.so");
    let apis = names["apis"].as_array().unwrap();
    assert_eq!(apis.len(), cudaleak_format::api::RECORDED.len());
    // What the variables are for is --names' whole answer: no variable options with it.
    bin()
        .args(["env", "--names", "--out", "dumps"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}
