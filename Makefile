# Weft: `make check` builds and runs every test; `make demo` runs the main
# job on the bundled model. Both install what is missing first.

BUILD ?= build
JOBS ?= 2
APT_PACKAGES = cmake ninja-build ccache g++ python3 python3-pip \
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools \
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler \
  libgtest-dev libomp-22-dev mpich libmpich-dev libopenblas-dev \
  python3-torch clang-format-14 python3-dev python3-venv pybind11-dev chromium
PIP_PACKAGES = onnx numpy onnxruntime lit safetensors pytest pillow
# Hugging Face transformers for test/Models/hf-exports.test, in a virtual
# environment beside the build that sees Debian's torch (python3-torch):
# the system's pip may not install into Debian's own Python.
HF_VENV = $(BUILD)/hf-venv
HF_PACKAGES = transformers==4.45.2
DEMO_DIR = $(BUILD)/demo
# The scripts in utils/ and bench/ find the tools through the weft package,
# which the build assembles here.
export PYTHONPATH := $(abspath $(BUILD))/python
# Runs write nothing into the repository, bytecode caches included.
export PYTHONDONTWRITEBYTECODE := 1

# The sanitized build (ASan + UBSan, clang, libFuzzer coverage) for
# `make check-asan` and `make fuzz`, beside the normal one.
ASAN_BUILD ?= build-asan
SANITIZER_APT_PACKAGES = clang-22 libclang-rt-22-dev
SANITIZER_FLAGS = -O1 -gline-tables-only -DNDEBUG
FUZZ_SECONDS ?= 60

.PHONY: all deps hf-venv build check check-lit check-unit check-python check-onnx-node check-conformance check-format demo docs clean \
  deps-sanitizers build-sanitized check-asan fuzz

all: build

# Installs only what is missing, so a second run costs a few seconds.
deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@python3 -c "import onnx, numpy, onnxruntime, safetensors, pytest, PIL" 2>/dev/null && command -v lit >/dev/null || \
	  python3 -m pip install -q $(PIP_PACKAGES)

# Made only when missing (a second run costs nothing); a failed install
# leaves no half-made environment behind.
hf-venv: $(HF_VENV)/.installed

$(HF_VENV)/.installed:
	@$(MAKE) --no-print-directory deps
	rm -rf $(HF_VENV)
	/usr/bin/python3 -m venv --system-site-packages $(HF_VENV)
	$(HF_VENV)/bin/pip install -q $(HF_PACKAGES) || { rm -rf $(HF_VENV); exit 1; }
	touch $@

$(BUILD)/build.ninja:
	cmake -G Ninja -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD) -j$(JOBS)

check-unit: build
	$(BUILD)/bin/WeftUnitTests

# The generated docs are built first: a lit test checks docs/generated/.
DOC_TARGETS = WeftOpsDocGen WeftInterfacesDocGen WeftPassesDocGen WeftConversionPassesDocGen \
  WeftLoweringPassesDocGen WeftCPUPassesDocGen WeftGPUPassesDocGen

check-lit: build hf-venv
	ninja -C $(BUILD) $(DOC_TARGETS)
	lit -sv $(BUILD)/test

# The Python package's tests, with the build tree's package importable; one
# installs it with pip into a fresh virtual environment and runs the
# tutorial there.
check-python: build
	PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -p no:cacheprovider python/tests

check-onnx-node: build
	python3 utils/onnx_node_tests.py --jobs $(JOBS)

check-conformance: build
	python3 utils/onnx_conformance.py --jobs $(JOBS)

# Every suite runs even when one before it fails; each prints its summary,
# then one line says which failed and how long it all took.
# C++ lines changed by the last commit (and the working tree) are formatted.
check-format: deps
	utils/check_format.sh

CHECK_SUITES = check-format check-unit check-lit check-python check-onnx-node check-conformance

check: build
	@start=$$(date +%s); failed=""; \
	for suite in $(CHECK_SUITES); do \
	  $(MAKE) --no-print-directory $$suite || failed="$$failed $$suite"; \
	done; \
	seconds=$$(( $$(date +%s) - start )); \
	if [ -n "$$failed" ]; then \
	  echo "== make check: FAILED:$$failed ($$seconds s)"; exit 1; \
	fi; \
	echo "== make check: all $(words $(CHECK_SUITES)) suites passed ($$seconds s)"

DEMO_PROMPT = To be, or not to be, that is the
DEMO_SEQ = 32

# The bundled GPT-2-style model (byte vocabulary, random weights until the
# training issue lands): import, fuse, compile to a native executable, predict.
demo: build
	mkdir -p $(DEMO_DIR)
	python3 utils/gen_gpt2.py --seq $(DEMO_SEQ) -o $(DEMO_DIR)/gpt2.onnx
	$(BUILD)/bin/weft-translate --import-onnx $(DEMO_DIR)/gpt2.onnx --fuse -o $(DEMO_DIR)/gpt2.fused.mlir
	@echo "== weft IR after import and weft-fuse-idioms ($(DEMO_DIR)/gpt2.fused.mlir)"
	@python3 utils/summarize_ir.py $(DEMO_DIR)/gpt2.fused.mlir
	$(BUILD)/bin/weftc $(DEMO_DIR)/gpt2.onnx -o $(DEMO_DIR)/gpt2
	@echo "== compiled: $(DEMO_DIR)/gpt2 (+ gpt2.weights)"
	@python3 utils/demo_predict.py $(DEMO_DIR)/gpt2 --seq $(DEMO_SEQ) --prompt "$(DEMO_PROMPT)"
	$(BUILD)/bin/weftc $(DEMO_DIR)/gpt2.onnx --mesh tp=2 --parallel megatron --sequence-parallel --report -o $(DEMO_DIR)/gpt2_tp2
	@echo "== the same model on 2 ranks (Megatron tensor + sequence parallelism over MPI): same prediction"
	@python3 utils/demo_predict.py $(DEMO_DIR)/gpt2_tp2 --launcher $(BUILD)/bin/weft-run --seq $(DEMO_SEQ) --prompt "$(DEMO_PROMPT)"
	@echo "== training the same model (batch 8) on tiny Shakespeare, 4 ranks: dp=2 x tp=2, AdamW, 200 steps"
	python3 utils/gen_gpt2.py --seq $(DEMO_SEQ) --batch 8 -o $(DEMO_DIR)/gpt2_train.onnx
	$(BUILD)/bin/weftc $(DEMO_DIR)/gpt2_train.onnx --train --mesh dp=2,tp=2 --parallel dp,megatron -o $(DEMO_DIR)/gpt2_train
	rm -rf $(DEMO_DIR)/ckpt
	$(BUILD)/bin/weft-run $(DEMO_DIR)/gpt2_train --data data/tinyshakespeare.tokens --steps 200 --lr 3e-3 --warmup 20 --print-every 20 --log $(DEMO_DIR)/train.jsonl --ckpt-dir $(DEMO_DIR)/ckpt --save-every 100
	@echo "== the trained weights (checkpoint $(DEMO_DIR)/ckpt/$$(cat $(DEMO_DIR)/ckpt/latest)) in the 1-rank model"
	python3 utils/checkpoint_to_onnx.py $(DEMO_DIR)/ckpt/$$(cat $(DEMO_DIR)/ckpt/latest) $(DEMO_DIR)/gpt2.onnx -o $(DEMO_DIR)/gpt2_trained.onnx
	$(BUILD)/bin/weftc $(DEMO_DIR)/gpt2_trained.onnx -o $(DEMO_DIR)/gpt2_trained
	@python3 utils/demo_predict.py $(DEMO_DIR)/gpt2_trained --seq $(DEMO_SEQ) --prompt "$(DEMO_PROMPT)" --generate 40

deps-sanitizers: deps
	@missing=$$(for p in $(SANITIZER_APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(ASAN_BUILD)/build.ninja:
	cmake -G Ninja -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
	  -DCMAKE_C_FLAGS_RELEASE="$(SANITIZER_FLAGS)" -DCMAKE_CXX_FLAGS_RELEASE="$(SANITIZER_FLAGS)" \
	  -DWEFT_SANITIZE=ON -DWEFT_FUZZ=ON

build-sanitized: deps-sanitizers $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD) -j$(JOBS)

# The unit and lit tests (the multi-rank ones included) with every binary
# under ASan and UBSan: any report fails the test that ran into it.
check-asan: build-sanitized
	@start=$$(date +%s); \
	ASAN_OPTIONS=detect_leaks=1 $(ASAN_BUILD)/bin/WeftUnitTests && \
	  ninja -C $(ASAN_BUILD) $(DOC_TARGETS) && lit -sv $(ASAN_BUILD)/test; \
	status=$$?; echo "== make check-asan: $$( [ $$status = 0 ] && echo passed || echo FAILED ) ($$(( $$(date +%s) - start )) s)"; \
	exit $$status

# Every fuzz target for FUZZ_SECONDS; corpora and crashes in $(ASAN_BUILD)/fuzz.
fuzz: build-sanitized
	python3 utils/fuzz.py --bin $(ASAN_BUILD)/bin --seconds $(FUZZ_SECONDS) --jobs $(JOBS) --work $(ASAN_BUILD)/fuzz

# The op and pass reference, generated from TableGen into docs/generated/.
docs: build
	ninja -C $(BUILD) $(DOC_TARGETS)
	mkdir -p docs/generated
	cp $(BUILD)/docs/Dialects/WeftOps.md $(BUILD)/docs/Dialects/WeftInterfaces.md \
	  $(BUILD)/docs/WeftPasses.md \
	  $(BUILD)/docs/WeftConversionPasses.md $(BUILD)/docs/WeftLoweringPasses.md \
	  $(BUILD)/docs/WeftCPUPasses.md $(BUILD)/docs/WeftGPUPasses.md \
	  docs/generated/

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
