# PaceDB front door. On a fresh Debian 12 machine:
#   make demo   installs dependencies (as root), builds Release, trains MF on generated data
#   make test   installs dependencies (and openmpi-bin, python3-torch for tests), builds Release,
#               runs the test suite (ctest)
# Other targets: build, python, asan, tsan (asan-build, tsan-build: build only), fuzz,
# thread-safety, bench, format, format-check, clean.

SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_LABELS ?= unit|integration
DEMO_DIR ?= $(BUILD)/demo

DEBIAN_PACKAGES := cmake g++ make pkg-config librocksdb-dev libboost-dev libflatbuffers-dev \
  flatbuffers-compiler libgflags-dev libgoogle-glog-dev libgtest-dev libgmock-dev googletest \
  libbenchmark-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest python3-dev
# What the test suite needs beyond the build: mpirun for the MPI launch test
# (tests/cluster), PyTorch for the pacedb.torch tests and examples (python/),
# setcap for paced_test's file-capability case (tests/server).
# `make test` installs them (as root; otherwise it says how, and those tests
# are reported as skipped).
TEST_PACKAGES := openmpi-bin python3-torch libcap2-bin
# Optional: gnuplot for the experiment figures. `make deps-optional` (also
# installs TEST_PACKAGES).
OPTIONAL_PACKAGES := $(TEST_PACKAGES) gnuplot-nox

.PHONY: all deps deps-optional deps-test build python demo test asan asan-build asan-storage tsan tsan-build fuzz bench format \
  format-check clean thread-safety san-deps clang-deps

all: build

# Installs missing Debian packages (root only; otherwise prints the command).
deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "missing packages; run as root:"; \
	    echo "  sudo apt-get update && sudo apt-get install -y $$missing"; \
	    exit 1; \
	  fi; \
	fi

deps-optional:
	@$(MAKE) --no-print-directory deps DEBIAN_PACKAGES="$(OPTIONAL_PACKAGES)"

# TEST_PACKAGES: installed as root; otherwise a note (the tests that need them skip).
deps-test:
	@missing=$$(for p in $(TEST_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "note: not installed: $$missing; the tests that need them are skipped (as root:" \
	      "apt-get install -y $$missing)"; \
	  fi; \
	fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# The pacedb Python module (python/README.md), into $(BUILD)/python/pacedb.
python: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS) --target pacedb_python

demo: build
	@bash tools/demo.sh $(BUILD) $(DEMO_DIR)

test: deps-test build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -L '$(CTEST_LABELS)'

# Sanitizer builds: ASan + UBSan, and TSan, each in its own build dir, on the
# whole default suite (multi-process tests start the sanitizer builds of the
# binaries). Fails on a failed test or on any sanitizer report from any process
# (cmake/sanitizer_reports.sh). SAN_JOBS: build and ctest parallelism.
# Built there: what the suite runs. Not the benchmark programs
# (-DPACE_BUILD_BENCHMARKS=OFF: no test runs one), nor, unless CTEST_LABELS
# names slow, the tests labelled slow only (-DPACE_BUILD_SLOW_TESTS=OFF); the
# Release build compiles both. SAN_CMAKE_ARGS comes last and can turn them on.
SAN_JOBS ?= 2
SAN_CMAKE_ARGS ?=
# The sanitizer trees are compiled with clang (SAN_CXX): with -fsanitize it
# compiles this tree's translation units 1.8-3x faster than GCC (9-13 s against
# 23-31 s each for the largest, ASan at -O2), which is most of CI's time.
# It needs clang's sanitizer runtimes (libclang-rt-14-dev), installed here as
# root. SAN_CXX=g++ builds them with GCC instead.
SAN_CXX ?= clang++
san-deps: $(if $(filter clang++,$(SAN_CXX)),clang-deps,deps)
# clang and its sanitizer and libFuzzer runtimes (as root; otherwise the command).
clang-deps: deps
	@command -v clang++ >/dev/null && dpkg-query -W -f='$${Status}' libclang-rt-14-dev 2>/dev/null | grep -q 'ok installed' || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq clang libclang-rt-14-dev >/dev/null; \
	  else echo "run as root: apt-get install -y clang libclang-rt-14-dev"; exit 1; fi; }
# -g1 (line tables): a report's stack has every function, file and line, and
# each translation unit compiles ~16% faster than with full debug info
# (objects 2.4-2.6x smaller, so links are faster too).
SAN_CONFIG = -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  -DPACE_BUILD_BENCHMARKS=OFF \
  -DPACE_BUILD_SLOW_TESTS=$(if $(findstring slow,$(CTEST_LABELS)),ON,OFF)
# $(call san_configure,asan|tsan): configures build-asan or build-tsan. The
# compiler is passed as CMAKE_CXX_COMPILER, not as $CXX (which CMake reads only
# into a new tree): a tree configured with another compiler is then
# configured afresh with SAN_CXX (CMake says it deletes the cache).
san_configure = cmake -S . -B build-$(1) -DCMAKE_CXX_COMPILER=$(SAN_CXX) $(SAN_CONFIG) \
  -DPACE_SANITIZE=$(1) $(SAN_CMAKE_ARGS)
asan-build: san-deps
	$(call san_configure,asan)
	cmake --build build-asan -j$(SAN_JOBS)

asan: asan-build
	bash cmake/sanitizer_reports.sh build-asan -j$(SAN_JOBS) -L '$(CTEST_LABELS)' $(CTEST_ARGS)

# ASan+UBSan on the common and storage suites only (faster than `make asan`).
asan-storage: san-deps
	$(call san_configure,asan)
	cmake --build build-asan -j$(SAN_JOBS) --target storage_suite
	bash cmake/sanitizer_reports.sh build-asan -R '^(common|storage)_'

# libFuzzer run of the frame decoder + message verifier (needs clang; installs it as root).
FUZZ_SECONDS ?= 60
fuzz: clang-deps
	CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-fuzz -j$(JOBS) --target net_frame_fuzzer net_fuzz_seeds
	mkdir -p build-fuzz/corpus && build-fuzz/bin/net_fuzz_seeds build-fuzz/corpus
	build-fuzz/bin/net_frame_fuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
	  -print_final_stats=1 build-fuzz/corpus

tsan-build: san-deps
	$(call san_configure,tsan)
	cmake --build build-tsan -j$(SAN_JOBS)

tsan: tsan-build
	bash cmake/sanitizer_reports.sh build-tsan -j$(SAN_JOBS) -L '$(CTEST_LABELS)' $(CTEST_ARGS)

# clang's thread-safety analysis (-Wthread-safety -Werror) over the whole tree, in build-tsa
# (needs clang; installs it as root, as `make fuzz` does). Configures build-tsa, makes the
# generated headers, then runs clang's front end (-fsyntax-only, where the analysis runs) on
# every translation unit of its compile_commands.json with that build's flags
# (cmake/thread_safety_check.py): the diagnostics of a full build, without code generation or
# linking; fails on any error (-Werror: every warning is one). `cmake --build build-tsa` still
# builds that tree in full.
thread-safety: deps
	@command -v clang++ >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq clang >/dev/null; \
	  else echo "run as root: apt-get install -y clang"; exit 1; fi; }
	CXX=clang++ cmake -S . -B build-tsa -DCMAKE_BUILD_TYPE=Debug -DPACE_THREAD_SAFETY=ON
	cmake --build build-tsa -j$(JOBS) --target pace_generated_headers
	python3 cmake/thread_safety_check.py build-tsa -j$(JOBS)

bench: build
	@bash tools/bench/run.sh $(BUILD)

format: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) --target format

format-check: $(BUILD)/CMakeCache.txt
	@command -v clang-format >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq clang-format >/dev/null; \
	  else echo "run as root: apt-get install -y clang-format"; exit 1; fi; }
	cmake -S . -B $(BUILD) >/dev/null
	cmake --build $(BUILD) --target format-check

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz build-tsa

# Installs the binaries, the client library (PaceDB::client, pacedb.pc) and its headers.
PREFIX ?= /usr/local
.PHONY: install package
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# A Debian package of the same files: build/pacedb_VERSION_ARCH.deb (install with apt-get install ./FILE).
package: build
	cd $(BUILD) && cpack -G DEB
