//! Every CUDA runtime major asks the driver for its entry points at its own versions (issue 45):
//! CUDA 11.8's runtime through the v1 `cuGetProcAddress` at cudaVersion 11080, 12.x's and
//! 13.x's through `cuGetProcAddress_v2`, each naming the `_v2`/`_v3`/`_ptsz` forms it was built
//! for. The lookups a real runtime made on a GPU are kept in tests/data/runtime-requests/
//! (`scripts/gpu-matrix.sh spy` over each release's samples; the static and the shared runtime
//! of a release asked exactly the same, so one list per release is kept); here each
//! one is asked again of the null driver under the shim, through the `cuGetProcAddress` that
//! `dlsym(libcuda)` hands out. Wherever the real driver's answer is a function the shim hooks,
//! the shim must hand out its own function of that very name: a versioned entry point the hook
//! table lacks, or one it maps to another form, fails here for the release that asks for it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cudaleak_tests::Scenario;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/runtime-requests")
}

/// One replayed lookup, as runtime_requests.c prints it.
#[derive(Debug)]
struct Line {
    symbol: String,
    version: String,
    answer: String,
    shim_exports: bool,
    handed: String,
}

fn replay(file: &Path) -> Vec<Line> {
    let run = Scenario::new("runtime_requests")
        .arg(file.to_str().expect("a UTF-8 path"))
        .run_shim();
    run.assert_exit(0);
    run.stdout
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 6, "{}: {l:?}", file.display());
            Line {
                symbol: f[0].into(),
                version: f[1].into(),
                answer: f[3].into(),
                shim_exports: f[4] == "1",
                handed: f[5].into(),
            }
        })
        .collect()
}

/// Every release's runtime asks for these, and the shim must hand out its own: what a program
/// allocates and frees with, every form of graph instantiation (the 11.x one included, which
/// 12.x and 13.x still ask for), and every form of beginning and ending a stream capture (a
/// capture the shim did not see begin would have its graph's allocation nodes recorded as
/// blocks: shim/src/hooks/pools.rs).
const EVERY_RELEASE: &[&str] = &[
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemAllocAsync",
    "cuMemAllocAsync_ptsz",
    "cuGraphInstantiate",
    "cuGraphInstantiate_v2",
    "cuGraphInstantiateWithFlags",
    "cuGraphLaunch",
    "cuGraphLaunch_ptsz",
    "cuStreamBeginCapture",
    "cuStreamBeginCapture_ptsz",
    "cuStreamBeginCapture_v2",
    "cuStreamBeginCapture_v2_ptsz",
    "cuStreamEndCapture",
    "cuStreamEndCapture_ptsz",
];

/// From CUDA 12 on: the forms 11.8's runtime does not ask for.
const SINCE_12: &[&str] = &[
    "cuGetProcAddress_v2",
    "cuStreamBeginCaptureToGraph",
    "cuStreamBeginCaptureToGraph_ptsz",
    "cuGraphInstantiateWithParams",
    "cuGraphInstantiateWithParams_ptsz",
];

fn check_release(major: &str) {
    let mut hooked = BTreeSet::new();
    let file = data_dir().join(format!("{major}.tsv"));
    assert!(file.is_file(), "{} is missing", file.display());
    for line in replay(&file) {
        if !line.shim_exports {
            continue;
        }
        assert_eq!(
            line.handed,
            format!("{}@shim", line.answer),
            "CUDA {major}: {}@{} is {} on a GPU's driver; under the shim on the null driver \
             the program was handed {}",
            line.symbol,
            line.version,
            line.answer,
            line.handed
        );
        hooked.insert(line.answer);
    }
    let since_12: &[&str] = if major.starts_with("11.") {
        &[]
    } else {
        SINCE_12
    };
    for needed in EVERY_RELEASE.iter().chain(since_12) {
        assert!(
            hooked.contains(*needed),
            "CUDA {major}: {needed} was never handed out by the shim ({hooked:?})"
        );
    }
}

#[test]
fn cuda_11_8_runtime_lookups_reach_the_shim() {
    check_release("11.8");
}

#[test]
fn cuda_12_runtime_lookups_reach_the_shim() {
    check_release("12.4");
}

#[test]
fn cuda_13_0_runtime_lookups_reach_the_shim() {
    check_release("13.0.88");
}

#[test]
fn newest_cuda_13_runtime_lookups_reach_the_shim() {
    check_release("13.5.37");
}
