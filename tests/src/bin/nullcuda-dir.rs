//! Prints the directory holding the null-device libcuda.so.1 and libcudart.so.13, for
//! `LD_LIBRARY_PATH=$(cargo run -q -p cudaleak-tests --bin nullcuda-dir) ./program`.

fn main() {
    println!("{}", cudaleak_tests::NULLCUDA_DIR);
}
