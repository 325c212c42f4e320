# Set-up and the two jobs a user runs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast install dot browser-latex bench clean pictures docs mutate

install: $(STAMP)

# constraints.txt pins every package to the versions tested here (pyproject.toml gives ranges)
$(STAMP): pyproject.toml setup.py constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	@touch $(STAMP)

# Graphviz's `dot` draws the pictures; install it from Debian when we can, else say how.
dot:
	@if command -v dot >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Graphviz (apt-get install -y graphviz)"; \
	  apt-get update -qq && apt-get install -y -qq graphviz >/dev/null; \
	else \
	  echo "error: Graphviz's 'dot' is missing. Install it with: sudo apt-get install -y graphviz" >&2; \
	  echo "       (or your platform's graphviz package), then run make again." >&2; \
	  exit 1; \
	fi

# The suite drives a headless browser (tests/test_html.py) and compiles TikZ (tests/test_tikz.py):
# Debian's chromium, chromium-driver, texlive-latex-base and texlive-pictures, installed when we
# can; else say how (the tests then skip, saying why, unless CI is set: there they fail).
BROWSER_LATEX := chromium:chromium chromedriver:chromium-driver pdflatex:texlive-latex-base \
                 tikz.sty:texlive-pictures
browser-latex:
	@missing=""; for pair in $(BROWSER_LATEX); do tool=$${pair%%:*}; pkg=$${pair#*:}; \
	  if [ $$tool = tikz.sty ]; then kpsewhich tikz.sty >/dev/null 2>&1 || missing="$$missing $$pkg"; \
	  else command -v $$tool >/dev/null 2>&1 || missing="$$missing $$pkg"; fi; done; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing$$missing (apt-get install -y$$missing)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else \
	  echo "warning: missing$$missing; the browser and TikZ tests will skip (CI=true: fail)." >&2; \
	  echo "         Install with: sudo apt-get install -y$$missing" >&2; \
	fi

demo: install dot
	$(BIN)/stringdiag check gallery/*.diag
	@for f in gallery/*.diag; do [ $$f = gallery/mechanisms.diag ] || $(BIN)/stringdiag render $$f -o gallery/ || exit 1; done
	$(BIN)/stringdiag info gallery/attention.diag -d SelfAttention
	$(BIN)/stringdiag derive gallery/linearize.deriv --verify
	$(BIN)/stringdiag compile gallery/anatomy.diag -d M1 --dims d=32,k=32 -o runs/demo/modules/M1
	$(BIN)/stringdiag compile gallery/anatomy.diag -d M0 --dims d=32,k=32 -o runs/demo/modules/M0
	$(BIN)/stringdiag train gallery/anatomy.diag -d M1 --layers 1 --max-steps 200 --eval-every 100 --test-tokens 10000 -o runs/demo/train-M1

# Every picture in gallery/, made as gallery/PICTURES says (tests/test_pictures.py fails when one is stale).
pictures: install dot
	@grep -v '^#' gallery/PICTURES | while read -r line; do $(BIN)/stringdiag $$line || exit 1; done

# Two workers, one torch thread each (small tensors: one thread is faster, and steady). loadfile keeps
# a module's shared fixture (a study, a trained run) on one worker; tests/conftest.py puts the
# modules with slow tests first. test-fast leaves out the tests marked slow (docs/contributing.md).
PYTEST := OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(BIN)/python -m pytest -q -n $${TEST_WORKERS:-2} \
          --dist loadfile --no-loadscope-reorder

test: install dot browser-latex
	@echo "running the whole suite (two workers, one thread each; PYTEST_ADDOPTS=--cpu-durations=30 lists where the CPU time went)"
	$(PYTEST)

test-fast: install dot browser-latex
	@echo "running the suite without the tests marked slow (-m 'not slow')"
	$(PYTEST) -m "not slow"

# Plant one small bug at a time in chosen functions (in a scratch copy of the committed tree) and
# run the tests that cover them; docs/contributing.md has the score and the times (CPU heavy: each
# target takes tens of minutes on busy cores; `tools/mutate.py TARGET` runs one).
mutate: install
	$(BIN)/python tools/mutate.py

# The speed table first (each row against a reference in the same run, CPU time, printed as it
# goes; 10 to 30 minutes of wall time on 2 shared cores), then the other benchmarks; the old VF2 path of
# bench_iso.py only with --vf2, the minutes-long rows of the table only with bench_table.py --all.
bench: install dot
	$(BIN)/python benchmarks/bench_table.py
	$(BIN)/python benchmarks/bench_check.py
	$(BIN)/python benchmarks/bench_attention.py
	$(BIN)/python benchmarks/bench_lm.py
	$(BIN)/python benchmarks/bench_rewrite.py
	$(BIN)/python benchmarks/bench_derive.py
	$(BIN)/python benchmarks/bench_enumerate.py
	$(BIN)/python benchmarks/bench_info.py
	$(BIN)/python benchmarks/bench_iso.py
	$(BIN)/python benchmarks/bench_heads.py
	$(BIN)/python benchmarks/bench_recurrence.py
	$(BIN)/python benchmarks/bench_startup.py

# The documentation site, into site/ (any warning fails the build). The docs extra is installed
# with the same pins as `install` (constraints.txt, when there is one: an unpinned torch is GBs).
docs: install
	$(BIN)/python -m pip install --quiet -e '.[docs]' $$(test -f constraints.txt && echo -c constraints.txt)
	$(BIN)/python -m mkdocs build --strict

clean:
	rm -rf $(VENV) *.egg-info runs site
