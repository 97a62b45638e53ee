# cudaleak — thin entry points. Every recipe calls cargo, nvcc or a script in scripts/; nothing a
# test needs lives here (the tests build the samples through scripts/build-samples.sh themselves).
#
#   make                 build the shim and the CLI (release): target/release/{libcudaleak.so,cudaleak}
#   make samples         build cuda-samples/ twice: build/samples/static/ and build/samples/shared/
#   make demo            run two leaking samples under `cudaleak run` and print the report
#   make test            everything CI runs (.ci/run calls this); scripts/check-prereqs.sh first
#   make prereqs         scripts/check-prereqs.sh: what `make test` needs, each missing tool named
#                        with the command that installs it (a second, before minutes of building)
#   make nullcuda        the null-device CUDA runtime and driver at a stable path, target/nullcuda/
#                        (libcudart.so, libcuda.so.1, include/cuda_runtime.h); prints that path
#   make gpu-test        scripts/gpu-validate.sh (on a machine with an NVIDIA GPU and nvcc)
#   make bench           CPU benchmarks (scripts/bench.sh; GPU: scripts/gpu-bench.sh)
#   make wheel           target/wheels/cudaleak-*.whl: the CLI, the shim and the pytest plugin
#                        (scripts/wheel.sh; maturin from PATH or PyPI)
#   make wheel-aarch64   the aarch64 wheel, cross-built, then run under qemu-aarch64 on the null
#                        device (scripts/aarch64-smoke.sh); needs the Rust target
#                        aarch64-unknown-linux-gnu, gcc-aarch64-linux-gnu and qemu-user
#   make install PREFIX=/usr/local    bin/cudaleak (stripped) and lib/libcudaleak.so (with its
#                        line tables; STRIP_SHIM=1 strips it too)

CARGO  ?= cargo
PREFIX ?= /usr/local
RELEASE := $(CURDIR)/target/release
# CPython versions `make test` takes from Debian's unstable suite when PATH has none
# (scripts/debian-python.sh): the Python-frame tests run under each.
DEBIAN_PYTHONS ?= 3.14 3.15

.PHONY: all build samples demo prereqs nullcuda test gpu-test bench wheel wheel-aarch64 install clean

all: build

build:
	$(CARGO) build --release -p cudaleak-shim -p cudaleak-cli

samples:
	scripts/build-samples.sh both

demo: build
	scripts/demo.sh

wheel:
	scripts/wheel.sh

prereqs:
	@scripts/check-prereqs.sh

# tests/build.rs builds the null runtime under target/release/build/cudaleak-tests-<hash>/out/;
# this copies it where a user's compile and run lines can name it (README, "Without a GPU").
# cuda_runtime.h declares what the null runtime implements (tests/nullcuda/include/nullcudart.h),
# so a C file that includes <cuda_runtime.h> compiles without a CUDA toolkit. Only the path is
# printed on stdout: `export LD_LIBRARY_PATH=$$(make -s nullcuda)`.
NULLCUDA := $(CURDIR)/target/nullcuda
nullcuda:
	@$(CARGO) build -q --release -p cudaleak-tests --bin nullcuda-dir
	@rm -rf $(NULLCUDA) && mkdir -p $(NULLCUDA)/include
	@cp -P "$$($(RELEASE)/nullcuda-dir)"/libcuda* $(NULLCUDA)/
	@cp tests/nullcuda/include/*.h $(NULLCUDA)/include/
	@printf '%s\n' '/* make nullcuda: the runtime API as the null device implements it */' \
		'#include "nullcudart.h"' > $(NULLCUDA)/include/cuda_runtime.h
	@echo $(NULLCUDA)

AARCH64 := aarch64-unknown-linux-gnu
wheel-aarch64:
	scripts/aarch64-smoke.sh "$$(scripts/wheel.sh --target $(AARCH64))"

# The tests find the shim through CUDALEAK_SHIM; CUDALEAK_REQUIRE_SAMPLES=1 turns "no nvcc, sample
# tests skipped" into a failure, so CI cannot pass without having run them, and
# CUDALEAK_REQUIRE_BROWSER=1 does the same for the HTML report's test in headless Chromium, and
# CUDALEAK_REQUIRE_WHEEL=1 for the wheel's and the pytest plugin's tests (the wheel is built
# first; those tests install it with pytest and pytest-xdist from PyPI into a fresh venv).
# clippy runs in the release profile that the build and the tests use, so build scripts and
# proc macros are compiled once. On a cold target (2 cores, 2026-12-04), `CARGO_TARGET_DIR=<empty>
# cargo clippy --workspace --all-targets [--release] -- -D warnings` then `cargo build --release`:
# 47 + 71 = 118 s with --release, 51 + 93 = 144 s without. The shim's probe build (a measuring
# tool, scripts/build-probe.sh) is linted too, in a target directory of its own, so that code only
# it compiles does not rot.
test: prereqs
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings
	CARGO_TARGET_DIR=target/probe RUSTFLAGS="$$RUSTFLAGS --cfg cudaleak_probe" \
		$(CARGO) clippy -p cudaleak-shim --release -- -D warnings
	CARGO_TARGET_DIR=target/prefetch RUSTFLAGS="$$RUSTFLAGS --cfg cudaleak_prefetch" \
		$(CARGO) clippy -p cudaleak-shim --release --all-targets -- -D warnings
	python3 scripts/module-cycles.py shim/src cli/src format/src
	$(CARGO) build --release
	scripts/wheel.sh
	@# The aarch64 wheel where this machine can cross-build and emulate it (.ci/run installs
	@# what it needs); elsewhere it is skipped, and this says so.
	@if rustup target list --installed 2>/dev/null | grep -qx $(AARCH64) \
		&& command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null; then \
		$(MAKE) --no-print-directory wheel-aarch64; \
	else \
		echo "make test: the aarch64 wheel is skipped: no Rust target $(AARCH64), aarch64-linux-gnu-gcc or qemu-aarch64" >&2; \
	fi
	@# CPythons newer than this machine's from Debian's unstable suite, where there is none (once,
	@# into ~/.cache/cudaleak); without one its Python-frame tests are skipped, and this says so.
	path="$$PATH"; for v in $(DEBIAN_PYTHONS); do \
		command -v python$$v >/dev/null && continue; \
		bin=$$(scripts/debian-python.sh $$v "$$HOME/.cache/cudaleak/python$$v") && path="$$bin:$$path" \
			|| echo "make test: no CPython $$v (scripts/debian-python.sh failed): its Python-frame tests are skipped" >&2; \
	done; \
	PATH="$$path" \
	CUDALEAK_SHIM=$(RELEASE)/libcudaleak.so CUDALEAK_REQUIRE_SAMPLES=1 CUDALEAK_REQUIRE_BROWSER=1 CUDALEAK_REQUIRE_WHEEL=1 \
		$(CARGO) test --workspace --release --no-fail-fast

gpu-test:
	scripts/gpu-validate.sh

bench:
	scripts/bench.sh

# The CLI is installed stripped (18 MB -> 2 MB): it reports errors by input position, never by
# its own source lines. The shim keeps its line tables (debug = 1; 12 MB, 1.7 MB without): it
# runs inside other people's programs, where a crash, a perf profile or a gdb backtrace through
# it should name its lines; they are not loaded into memory. STRIP_SHIM=1 strips it as well.
STRIP_SHIM ?=
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib
	install -s -m 0755 $(RELEASE)/cudaleak $(DESTDIR)$(PREFIX)/bin/cudaleak
	install $(if $(STRIP_SHIM),-s) -m 0755 $(RELEASE)/libcudaleak.so $(DESTDIR)$(PREFIX)/lib/libcudaleak.so

# Only what this Makefile's targets made; `cargo clean` removes target/.
clean:
	rm -rf build/samples cudaleak-out
