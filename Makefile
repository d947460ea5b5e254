# Two commands for users: `make demo` and `make test`. Both create .venv on first use and
# never reinstall unless setup.py, setup.cfg or a requirements file changed, nor rebuild the
# ROS interface packages unless one of their files changed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp-install
SYSSTAMP := $(VENV)/.stamp-sysdeps
IFACESTAMP := $(VENV)/.stamp-interfaces
RUN_DIR ?= runs/demo
export MUJOCO_GL ?= osmesa
export PYOPENGL_PLATFORM ?= osmesa
export RMW_IMPLEMENTATION ?= rmw_fastrtps_cpp
export AMENT_PREFIX_PATH := $(CURDIR)/$(VENV)$(if $(AMENT_PREFIX_PATH),:$(AMENT_PREFIX_PATH))

.PHONY: demo test test-fast lint bench install sysdeps clean

install: $(STAMP) $(SYSSTAMP) $(IFACESTAMP)

# torch goes first and pinned: an unpinned torch requirement could pull a multi-GB CUDA build.
# The ament prefix (share/refine_ros) is a copy made at install time, so the files it holds are
# prerequisites too: a new launch file or profile reinstalls the package.
SHARED_FILES := $(wildcard launch/*.launch.py config/*.yaml config/*.rviz urdf/*)

# The node executables are console scripts setup.py makes from refine_ros/nodes/registry.py,
# which reads refine_ros/nodes/ and the robot folders refine_ros/robots/registry.py lists: a new
# robot, or a robot's node module added or changed, reinstalls (after adding a module to
# refine_ros/nodes/: touch the registry, or run pip install -e . again).
ROBOT_NODE_FILES := $(shell grep -l 'run_node.[A-Z]' refine_ros/robots/*/*.py 2>/dev/null)
$(STAMP): setup.py setup.cfg requirements.txt requirements-ros.txt requirements-ros-build.txt package.xml $(SHARED_FILES) \
		refine_ros/nodes/registry.py refine_ros/robots/registry.py $(ROBOT_NODE_FILES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -r requirements-ros.txt -r requirements-ros-build.txt
	$(BIN)/python -m pip install --quiet -e '.[dev,ray]'
	touch $@

# refine_ros_interfaces (always) and the test copies of external interface packages (where no
# real one is installed) are built into the venv: tools/build_interfaces.py, which rebuilds only
# a package whose files changed.
INTERFACE_FILES := $(wildcard refine_ros_interfaces/* refine_ros_interfaces/*/* test/interfaces/*/* test/interfaces/*/*/*)

$(IFACESTAMP): $(STAMP) $(SYSSTAMP) tools/build_interfaces.py $(INTERFACE_FILES)
	$(BIN)/python tools/build_interfaces.py
	touch $@

# bubblewrap isolates generated code; libosmesa6 renders MuJoCo without a GPU; a C++ compiler,
# cmake and the Python headers build the interface packages.
$(SYSSTAMP):
	@mkdir -p $(VENV)
	@missing=""; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	ls /usr/lib/*/libOSMesa.so* >/dev/null 2>&1 || missing="$$missing libosmesa6"; \
	command -v g++ >/dev/null 2>&1 || missing="$$missing g++"; \
	command -v cmake >/dev/null 2>&1 || missing="$$missing cmake"; \
	$(PYTHON) -c "import os, sysconfig; raise SystemExit(not os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
	  || missing="$$missing python3-dev"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "refine_ros needs the Debian packages:$$missing"; \
	    echo "  run: sudo apt-get install$$missing   (then re-run make)"; \
	    exit 1; \
	  fi; \
	fi
	@touch $@

# Replays a language model's recorded refinement of the door (results/llm/door_open/, or
# DEMO_TRANSCRIPT=FILE) through the ROS graph; the offline analyst when none is recorded.
demo: install
	$(BIN)/refine demo --run $(RUN_DIR) $(if $(DEMO_TRANSCRIPT),--transcript $(DEMO_TRANSCRIPT))

# Where PYTHONDONTWRITEBYTECODE is set (these development machines set it), no Python process
# caches the modules it compiles, and the suite starts hundreds (nodes, sandboxes, commands),
# each compiling every module of ours it imports: 0.03-0.3 s of CPU each, measured. Compiled
# once here instead (changed files only: 1.6 s on a fresh clone, 0.2 s after).
BYTECODE := $(BIN)/python -m compileall -q refine_core refine_ros tools > /dev/null

# The whole suite in WORKERS pytest-xdist workers, each on a DDS domain of its own: one worker
# takes the tests marked `alone` one after another, with the machine to itself, the others
# whole modules, the longest first (test/conftest.py).
# Two workers on two cores: most tests wait on a robot's clock, so the second one halves the
# wall time (34 -> 17-20 min here; four, tried before the `alone` tests had a worker of their own,
# were slower: docs/DEVELOPING.md). WORKERS=0: one test after another, in this process.
WORKERS ?= 2
test: install
	$(BYTECODE)
	$(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS) test

# The edit-run loop: every test that starts no ROS graph and is not marked slow, on a DDS domain
# no participant can join (a graph test without the `ros` mark fails here, saying so). Two
# workers: these tests mostly wait (sandbox deadlines, subprocesses), so a second one cuts
# the wall time by a third even on two cores (serial 4 min 9 s, two workers 2 min 51 s, here).
FAST_WORKERS ?= 2
test-fast: install
	$(BYTECODE)
	REFINE_TESTS_WITHOUT_DDS=1 $(BIN)/python -m pytest -q -n $(FAST_WORKERS) --dist loadfile --no-loadscope-reorder \
		-m "not ros and not slow" $(PYTEST_ARGS) test

lint: install
	$(BIN)/ruff check refine_core refine_ros test launch tools

bench: install
	$(BIN)/refine bench --json

clean:
	rm -rf $(VENV) build *.egg-info
