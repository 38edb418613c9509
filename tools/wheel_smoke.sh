#!/usr/bin/env bash
# The package as a user installs it: build the sdist and the wheel (`python -m build`: the wheel is built FROM
# the sdist, so a file missing from either fails here), install the wheel with its [serve] extra into a fresh
# venv in a temporary folder outside the checkout, and run the first hour of docs/getting-started.md there:
# make-tiny-model, synth, score, eval with its review page, bank validate on the bundled bank, audit on a few
# trajectories, and serve answering one curl request. Every command runs from an empty temporary folder with
# PYTHONPATH unset, so a file the package reads from the checkout instead of its own data fails the step.
#
#   tools/wheel_smoke.sh                   # PYTHON=python3 makes the venv; BUILD_PYTHON (default .venv's) builds
#   KEEP=1 tools/wheel_smoke.sh            # keep the temporary folder (printed) to look at what it wrote
#
# The dependencies' wheels are kept in a wheelhouse (WHEELHOUSE, default ~/.cache/adaptrubric-wheelhouse): the
# first run on a machine downloads torch and the rest into it (`pip download`), later runs install offline from it
# (`--no-index`), and a dependency it lacks fills it again. Prints the seconds each stage took to stderr.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
BUILD_PYTHON="${BUILD_PYTHON:-$ROOT/.venv/bin/python}"
WHEELHOUSE="${WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/adaptrubric-wheelhouse}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/adaptrubric-wheel.XXXXXX")"
case "$WORK/" in "$ROOT"/*) echo "wheel_smoke: $WORK is inside the checkout $ROOT" >&2; exit 1;; esac
SERVE_PID=""
cleanup() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
  if [ -n "${KEEP:-}" ]; then echo "wheel_smoke: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
T0=$(date +%s); LAST=$T0
stage() { local now; now=$(date +%s); echo "wheel_smoke: $1 ($((now - LAST)) s)" >&2; LAST=$now; }

LEFTOVERS=""  # what setuptools leaves beside the sources, removed after the build unless it was there before
for d in "$ROOT/build" "$ROOT/adaptrubric_local.egg-info"; do [ -e "$d" ] || LEFTOVERS="$LEFTOVERS $d"; done
"$BUILD_PYTHON" -m build --outdir "$WORK/dist" "$ROOT" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; exit 1; }
for d in $LEFTOVERS; do rm -rf "$d"; done
WHEEL="$(ls "$WORK"/dist/adaptrubric_local-*.whl)"
ls "$WORK"/dist/adaptrubric_local-*.tar.gz >/dev/null
stage "built $(basename "$WHEEL") and its sdist"

"$PYTHON" -m venv "$WORK/venv"
# offline from the wheelhouse when it holds every dependency; else fill it from the indexes first
if ! "$WORK/venv/bin/python" -m pip install --quiet --no-index --find-links "$WHEELHOUSE" "$WHEEL[serve]" \
    2>"$WORK/offline.log"; then
  mkdir -p "$WHEELHOUSE"
  "$WORK/venv/bin/python" -m pip download --quiet --dest "$WHEELHOUSE" "$WHEEL[serve]"
  rm -f "$WHEELHOUSE"/adaptrubric_local-*.whl  # the package itself always comes from this build
  "$WORK/venv/bin/python" -m pip install --quiet --no-index --find-links "$WHEELHOUSE" "$WHEEL[serve]"
fi
stage "installed the wheel with [serve] into a fresh venv"

# everything below runs from an empty folder, with nothing of the checkout on the path
mkdir "$WORK/run" && cd "$WORK/run"
unset PYTHONPATH
export PATH="$WORK/venv/bin:$PATH"
python - "$ROOT" <<'EOF'
import sys
from pathlib import Path

import adaptrubric_local

root, here = Path(sys.argv[1]).resolve(), Path(adaptrubric_local.__file__).resolve()
assert root not in here.parents, f"adaptrubric_local imported from the checkout: {here}"
assert not any(Path(p or ".").resolve() == root for p in sys.path), f"the checkout is on sys.path: {sys.path}"
print(f"wheel_smoke: adaptrubric_local {adaptrubric_local.__version__} from {here.parent}", file=sys.stderr)
EOF

adaptrubric make-tiny-model tiny >/dev/null
adaptrubric synth --out synth --tasks 4 --candidates 2 --size 96x192 >/dev/null
stage "make-tiny-model, synth"
adaptrubric score synth/trajectories.jsonl --model tiny --max-images 3 --out verdicts.jsonl >/dev/null
adaptrubric eval synth/trajectories.jsonl --verdicts verdicts.jsonl --out eval >/dev/null
test -s eval/report.md && test -s eval/review.html && test -s eval/metrics.json
stage "score, eval (report and review page)"
BANK="$(python -c 'from importlib.resources import files; print(files("adaptrubric_local") / "data" / "default_bank.yaml")')"
adaptrubric bank validate "$BANK" >/dev/null
head -n 3 synth/trajectories.jsonl >synth/few.jsonl  # beside its screens/: paths resolve against its folder
adaptrubric audit synth/few.jsonl --model tiny --max-images 3 --perturb claim-success --out audit >/dev/null
test -s audit/report.md
stage "bank validate (bundled bank), audit"

PORT="$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
adaptrubric serve --model tiny --max-images 3 --port "$PORT" --data-root synth 2>serve.log &
SERVE_PID=$!
for _ in $(seq 1 240); do
  curl -sf "127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"loaded": *true' && break
  kill -0 "$SERVE_PID" 2>/dev/null || { cat serve.log >&2; exit 1; }
  sleep 0.5
done
python -c 'import json; print(json.dumps({"trajectories": [json.loads(open("synth/trajectories.jsonl").readline())]}))' \
  >request.json
# the record's relative screenshot paths resolve against the service's --data-root (synth/)
curl -sf "127.0.0.1:$PORT/score" -H 'Content-Type: application/json' --data-binary @request.json >answer.json \
  || { cat serve.log >&2; exit 1; }
python - <<'EOF'
import json

answer = json.load(open("answer.json"))
first = json.loads(open("synth/trajectories.jsonl").readline())
(verdict,) = answer["verdicts"]
assert verdict["id"] == first["id"] and verdict["status"] in ("ok", "unparsed"), verdict
assert len(answer["rewards"]) == 1, answer
EOF
stage "serve answered one request"
echo "wheel_smoke: OK in $(( $(date +%s) - T0 )) s" >&2
