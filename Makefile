# The two commands: `make demo` (set up, build, run the main job) and
# `make test` (set up, build, run every test). Both are idempotent.
PY       ?= python3
BUILD    ?= build
JOBS     ?= 2
export MAX_JOBS := $(JOBS)

.PHONY: all setup build install test test-core test-python demo bench clean

all: build

setup:
	@scripts/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -G Ninja -DPython3_EXECUTABLE=$$(command -v $(PY))

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Editable install: registers the entry points (torch.backends autoload,
# torch_dynamo_backends) and points at python/trnscope, where the build puts
# _C.so. Redone when pyproject.toml changes or trnscope resolves elsewhere.
install: build $(BUILD)/.installed
	@$(PY) -c "import importlib.util as u, os, sys; s = u.find_spec('trnscope'); \
	  sys.exit(s is None or not os.path.samefile(os.path.dirname(s.origin), 'python/trnscope'))" \
	  2>/dev/null || { rm -f $(BUILD)/.installed; $(MAKE) --no-print-directory $(BUILD)/.installed; }

$(BUILD)/.installed: pyproject.toml
	$(PY) -m pip install -q --no-build-isolation --no-deps -e .
	@touch $@

test-core: build
	cd $(BUILD) && ctest --output-on-failure

test-python: install
	$(PY) -m pytest -q tests

test: test-core test-python

demo: install
	$(PY) -m trnscope.demo

bench: install
	$(BUILD)/trn_core_bench
	$(PY) bench/bench_device.py

clean:
	rm -rf $(BUILD) python/trnscope/_C*.so
