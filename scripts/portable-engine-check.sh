#!/usr/bin/env bash
# The install path of a platform without the fast engine (pyperscan has no wheel for
# Windows or other CPUs; its dependency marker leaves it out there): build the wheel, install it into a scratch venv whose
# other packages are the project venv's (linked, not reinstalled: pip resolving
# ~40 requirements took most of the 4-5 minutes this check used to need) but
# without pyperscan, check that every requirement of the wheel but pyperscan is
# there and that the redactor picks the portable engine (pyahocorasick), and run
# the redactor tests that exercise the engine there, and, the wheel being built as
# without a C compiler, the redactor's Python gates (no native module). The full redactor suite
# already runs on the portable engine in `make test` (every test is
# parametrized by engine); this check proves the install path and the engine
# choice. Without a project venv it falls back to pip installing everything.
# Usage: scripts/portable-engine-check.sh [python]   (make test runs it; ~40 s under load)
set -euo pipefail
SECONDS=0; step() { echo "portable-engine-check: $1 (${SECONDS} s)" >&2; }
cd "$(dirname "$0")/.."
PY=${1:-${PYTHON:-python3}}
VENV=${PORTABLE_CHECK_VENV:-.venv}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/pc-portable-XXXXXX")
trap 'rm -rf "$scratch"' EXIT

pip=(--quiet --disable-pip-version-check)
if [ -x "$VENV/bin/python" ]; then
    "$VENV/bin/python" -m venv --without-pip "$scratch/venv"
    site=$("$scratch/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    from=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    for entry in "$from"/*; do
        case "$(basename "$entry")" in
            pyperscan | pyperscan-* | hyperscan | hyperscan-* | paddedcell* | __editable__*paddedcell* | __pycache__) ;;
            *) ln -s "$entry" "$site/" ;;
        esac
    done
else
    "$PY" -m venv "$scratch/venv"
fi
# The project venv has the build backend (setuptools>=77, wheel: the dev extra): no
# isolated build environment to set up (that took a minute).
# CC=false: built as where there is no C compiler, so also without the redactor's native
# gates (setup.py: optional=True; the pure-Python forms run, see redactor/dumps.py). From a
# copy of the checkout's files: the checkout's build/ may hold a module built before.
tree=.
if git ls-files --error-unmatch setup.py >/dev/null 2>&1; then
    tree="$scratch/tree"
    mkdir "$tree"
    git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | (cd "$tree" && tar -xf -)
fi
if ! CC=false "$VENV/bin/python" -m pip "${pip[@]}" wheel --no-build-isolation --no-deps --wheel-dir "$scratch/dist" \
        "$tree" >/dev/null 2>&1; then
    CC=false "$scratch/venv/bin/python" -m pip "${pip[@]}" wheel --no-deps --wheel-dir "$scratch/dist" "$tree" >/dev/null
fi
step "wheel built"
wheel=$(ls "$scratch"/dist/paddedcell-*.whl)
# The wheel's own requirements, less the fast engine (as pip resolves them on aarch64).
"$scratch/venv/bin/python" - "$wheel" >"$scratch/requirements.txt" <<'PYEOF'
import sys, zipfile
from email.parser import Parser
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    requires = Parser().parsestr(z.read(meta).decode()).get_all("Requires-Dist") or []
for r in requires:
    name = r.split(";")[0].strip()
    if "extra ==" in r or name.lower().startswith("pyperscan"):
        continue
    print(name)
PYEOF
if [ ! -x "$VENV/bin/python" ]; then
    "$scratch/venv/bin/python" -m pip "${pip[@]}" install --no-compile -r "$scratch/requirements.txt" \
        "pytest>=8,<9" "pytest-trio>=0.8,<0.9" "hypothesis>=6.100,<7"
fi
"$scratch/venv/bin/python" -m pip "${pip[@]}" install --no-compile --no-deps "$wheel"
if "$scratch/venv/bin/python" -c "import pyperscan" 2>/dev/null; then
    echo "portable-engine-check: pyperscan is installed in the scratch venv; the check would prove nothing" >&2
    exit 1
fi
step "wheel installed"
"$scratch/venv/bin/python" - "$scratch/requirements.txt" <<'PYEOF'
import sys
from importlib import metadata
from packaging.requirements import Requirement
missing = []
for line in open(sys.argv[1]).read().splitlines():
    req = Requirement(line)
    try:
        if not req.specifier.contains(metadata.version(req.name), prereleases=True):
            missing.append(f"{req} (have {metadata.version(req.name)})")
    except metadata.PackageNotFoundError:
        missing.append(str(req))
assert not missing, f"requirements of the wheel not met without pyperscan: {missing}"
from paddedcell.redactor import matcher, redact
assert matcher.ENGINE is matcher.AhoMatcher, matcher.ENGINE
assert matcher.HyperscanMatcher not in matcher.ENGINES
assert redact(b"a s3cret-Value b", ["s3cret-Value"]) == b"a ###### b"
assert matcher.__file__.startswith(sys.prefix), matcher.__file__  # the installed wheel, not the checkout
from paddedcell.redactor import dumps, views
assert dumps._native is None and views._native is None, "the native gates were built without a compiler"
print("portable-engine-check: the wheel without pyperscan and without a C compiler runs on",
      matcher.ENGINE.name, "with the Python gates")
PYEOF
# The tests import the installed wheel (tests/ is on sys.path, src/ is not). The
# hypothesis properties ran on this engine in the main test run already, with the native
# gates; the gates' tests and the views' and dumps' oracle properties run here on their
# Python forms (the wheel has no native module), and then on Hyperscan's in the project
# venv with PADDEDCELL_NATIVE=0 (its Python forms differ by engine).
gates="percent or url or candidate or views_equal_the_oracle or dumps_equal_the_oracle"
venv_py=""
[ ! -x "$VENV/bin/python" ] || venv_py="$(cd "$VENV" && pwd)/bin/python"
cd tests
"$scratch/venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir=. -o addopts="" \
    -o trio_mode=true test_redactor.py test_redactor_filters.py \
    test_redactor_dumps.py::test_exact_under_every_split_and_byte_by_byte
"$scratch/venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir=. -o addopts="" \
    -o trio_mode=true test_redactor_views.py test_redactor_dumps.py -k "$gates"
step "the portable engine, the Python gates"
if [ -n "$venv_py" ] && "$venv_py" -c "import pyperscan" 2>/dev/null; then
    PADDEDCELL_NATIVE=0 PYTHONPATH="$PWD/../src" "$venv_py" -m pytest -q -p no:cacheprovider --rootdir=. \
        -o addopts="" -o trio_mode=true test_redactor_views.py test_redactor_dumps.py -k "($gates) and hyperscan"
fi
step "done"
