# cudaleak — thin entry points. Every recipe calls cargo, nvcc or a script in scripts/; nothing a
# test needs lives here (the tests build the samples through scripts/build-samples.sh themselves).
#
#   make                 build the shim and the CLI (release): target/release/{libcudaleak.so,cudaleak}
#   make samples         build cuda-samples/ twice: build/samples/static/ and build/samples/shared/
#   make demo            run two leaking samples under `cudaleak run` and print the report
#   make test            everything CI runs (.ci/run calls this; needs chromium for the HTML test)
#   make gpu-test        scripts/gpu-validate.sh (on a machine with an NVIDIA GPU and nvcc)
#   make bench           CPU benchmarks (scripts/bench.sh; GPU: scripts/gpu-bench.sh)
#   make install PREFIX=/usr/local    bin/cudaleak and lib/libcudaleak.so

CARGO  ?= cargo
PREFIX ?= /usr/local
RELEASE := $(CURDIR)/target/release

.PHONY: all build samples demo test gpu-test bench install clean

all: build

build:
	$(CARGO) build --release -p cudaleak-shim -p cudaleak-cli

samples:
	scripts/build-samples.sh both

demo: build
	scripts/demo.sh

# The tests find the shim through CUDALEAK_SHIM; CUDALEAK_REQUIRE_SAMPLES=1 turns "no nvcc, sample
# tests skipped" into a failure, so CI cannot pass without having run them, and
# CUDALEAK_REQUIRE_BROWSER=1 does the same for the HTML report's test in headless Chromium.
test:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) build --release
	CUDALEAK_SHIM=$(RELEASE)/libcudaleak.so CUDALEAK_REQUIRE_SAMPLES=1 CUDALEAK_REQUIRE_BROWSER=1 \
		$(CARGO) test --workspace --release --no-fail-fast

gpu-test:
	scripts/gpu-validate.sh

bench:
	scripts/bench.sh

install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib
	install -m 0755 $(RELEASE)/cudaleak $(DESTDIR)$(PREFIX)/bin/cudaleak
	install -m 0755 $(RELEASE)/libcudaleak.so $(DESTDIR)$(PREFIX)/lib/libcudaleak.so

# Only what this Makefile's targets made; `cargo clean` removes target/.
clean:
	rm -rf build/samples cudaleak-out
