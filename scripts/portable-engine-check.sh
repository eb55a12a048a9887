#!/usr/bin/env bash
# The install path of a platform without the fast engine (hyperscan 0.9.1 has no
# Linux aarch64 wheel): build the wheel, install it into a scratch venv with its
# dependencies but without hyperscan, check that the redactor picks the portable
# engine (pyahocorasick), and run the redactor tests there.
# Usage: scripts/portable-engine-check.sh [python]   (make test runs it; ~60-90 s)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-${PYTHON:-python3}}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/pc-portable-XXXXXX")
trap 'rm -rf "$scratch"' EXIT

"$PY" -m venv "$scratch/venv"
pip=("$scratch/venv/bin/pip" --quiet --disable-pip-version-check)
install=("${pip[@]}" install --no-compile)  # bytecode is written on first import, for the tests only
"${pip[@]}" wheel --no-deps --wheel-dir "$scratch/dist" . >/dev/null
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
    if "extra ==" in r or name.lower().startswith("hyperscan"):
        continue
    print(name)
PYEOF
"${install[@]}" -r "$scratch/requirements.txt" "pytest>=8,<9" "pytest-trio>=0.8,<0.9" "hypothesis>=6.100,<7"
"${install[@]}" --no-deps "$wheel"
if "$scratch/venv/bin/python" -c "import hyperscan" 2>/dev/null; then
    echo "portable-engine-check: hyperscan is installed in the scratch venv; the check would prove nothing" >&2
    exit 1
fi
"$scratch/venv/bin/python" - <<'PYEOF'
from paddedcell.redactor import matcher, redact
assert matcher.ENGINE is matcher.AhoMatcher, matcher.ENGINE
assert matcher.HyperscanMatcher not in matcher.ENGINES
assert redact(b"a s3cret-Value b", ["s3cret-Value"]) == b"a ###### b"
print("portable-engine-check: the wheel without hyperscan runs on", matcher.ENGINE.name)
PYEOF
# The tests import the installed wheel (tests/ is on sys.path, src/ is not).
cd tests
"$scratch/venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir=. -o addopts="" \
    -o trio_mode=true test_redactor.py test_redactor_views.py test_redactor_filters.py
