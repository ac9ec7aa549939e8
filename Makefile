# The two commands: `make demo` (set up, build, run the main job) and
# `make test` (set up, build, run every test). Both are idempotent.
PY       ?= python3
BUILD    ?= build
JOBS     ?= 2
export MAX_JOBS := $(JOBS)

.PHONY: all setup build install wheel test test-core test-python fuzz-smoke demo bench clean

all: build

setup:
	@scripts/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -G Ninja -DPython3_EXECUTABLE=$$(command -v $(PY))

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Editable install: registers the entry points (torch.backends autoload,
# torch_dynamo_backends) and points at python/trnscope, where the build puts
# _C.so and bin/trnscope (pip runs no CMake here: the editable override in
# pyproject.toml). Redone when pyproject.toml changes or trnscope resolves elsewhere.
install: build $(BUILD)/.installed
	@$(PY) -c "import importlib.util as u, os, sys; s = u.find_spec('trnscope'); \
	  sys.exit(s is None or not os.path.samefile(os.path.dirname(s.origin), 'python/trnscope'))" \
	  2>/dev/null || { rm -f $(BUILD)/.installed; $(MAKE) --no-print-directory $(BUILD)/.installed; }

$(BUILD)/.installed: pyproject.toml
	$(PY) -m pip install -q --no-build-isolation --no-deps -e .
	@touch $@

# A wheel built by pip through scikit-build-core (pyproject.toml, Note [CMake-driven build]).
wheel: setup
	$(PY) -m pip wheel --no-build-isolation --no-deps -w $(BUILD)/dist .

test-core: build
	cd $(BUILD) && ctest --output-on-failure

test-python: install
	$(PY) -m pytest -q tests

test: test-core test-python fuzz-smoke

# libFuzzer smoke runs on the trace reader (cli/fuzz_trace_reader.cc) and the
# executable reader (cli/fuzz_executable_reader.cc): clang++ with ASan + UBSan,
# outside the g++/CMake build. FUZZ_SECONDS of fuzzing each from the testdata
# seeds; a crash, sanitizer report, leak or hang fails the target and leaves
# the input in $(FUZZ_DIR)/crash-* or exe-crash-* (or leak-*, timeout-*).
FUZZ_SECONDS ?= 30
FUZZ_DIR     := $(BUILD)/fuzz
# Deferred (=): evaluated after `setup` has installed clang.
FUZZ_CLANG    = $(shell command -v clang++-14 || command -v clang++)
FUZZ_CXX      = $(if $(shell command -v ccache),ccache )$(FUZZ_CLANG)
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_SRCS    := cli/fuzz_trace_reader.cc $(filter-out %_test.cc %_benchmark.cc \
                core/analysis/reports/sqlite_export.cc,$(wildcard core/analysis/*/*.cc))
FUZZ_OBJS    := $(patsubst %.cc,$(FUZZ_DIR)/obj/%.o,$(FUZZ_SRCS))
FUZZ_SEEDS   := $(wildcard core/analysis/testdata/*.json core/analysis/testdata/*.bin)
FUZZ_EXE_SRCS := cli/fuzz_executable_reader.cc $(filter-out %_test.cc %_benchmark.cc,\
                 $(wildcard core/isa/*.cc core/model/*.cc))
FUZZ_EXE_OBJS := $(patsubst %.cc,$(FUZZ_DIR)/obj/%.o,$(FUZZ_EXE_SRCS))

$(FUZZ_DIR)/obj/%.o: %.cc Makefile
	@mkdir -p $(@D)
	$(FUZZ_CXX) -std=c++20 -O1 -gline-tables-only -fsanitize=fuzzer-no-link $(FUZZ_SAN) -I. -MMD -MP -c $< -o $@
-include $(FUZZ_OBJS:.o=.d) $(FUZZ_EXE_OBJS:.o=.d)

$(FUZZ_DIR)/fuzz_trace_reader: $(FUZZ_OBJS)
	$(FUZZ_CLANG) -fsanitize=fuzzer $(FUZZ_SAN) $^ -lsimdjson -lfmt -lz -o $@

$(FUZZ_DIR)/fuzz_executable_reader: $(FUZZ_EXE_OBJS)
	$(FUZZ_CLANG) -fsanitize=fuzzer $(FUZZ_SAN) $^ -lfmt -lz -o $@

fuzz-smoke: setup
	@test -n "$(FUZZ_CLANG)" || { echo "fuzz-smoke: clang++ not found (scripts/setup.sh installs clang-14)"; exit 1; }
	@$(MAKE) --no-print-directory -j $(JOBS) $(FUZZ_DIR)/fuzz_trace_reader \
	  $(FUZZ_DIR)/fuzz_executable_reader
	@mkdir -p $(FUZZ_DIR)/corpus && cp $(FUZZ_SEEDS) $(FUZZ_DIR)/corpus/
	UBSAN_OPTIONS=print_stacktrace=1 $(FUZZ_DIR)/fuzz_trace_reader $(FUZZ_DIR)/corpus \
	  -dict=cli/fuzz_trace_reader.dict -max_total_time=$(FUZZ_SECONDS) -max_len=32768 \
	  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/
	@mkdir -p $(FUZZ_DIR)/exe_corpus && cp core/isa/testdata/*.trnx core/isa/testdata/*.bin $(FUZZ_DIR)/exe_corpus/
	UBSAN_OPTIONS=print_stacktrace=1 $(FUZZ_DIR)/fuzz_executable_reader $(FUZZ_DIR)/exe_corpus \
	  -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
	  -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/exe-

demo: install
	$(PY) -m trnscope.demo

bench: install
	$(BUILD)/trn_core_bench
	$(PY) bench/bench_device.py

clean:
	rm -rf $(BUILD) build-wheel python/trnscope/_C*.so python/trnscope/bin
