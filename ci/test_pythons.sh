#!/usr/bin/env bash
# The suite on every CPython besides the default one (CI runs this after `make test`, which covers
# the oldest, 3.11, in full): on each, the folders that meet the interpreter's own differences
# (bytecode, graph breaks and resume code, Python semantics); on 3.12 (the GPU machine's Python)
# and 3.15 (torch 2.15) the core folder as well, and on 3.15 the warm start's fresh processes
# (pickled code and torch's caches). $JOBS pytest workers; STENOGRAPH_CI_FOLDERS=tests runs
# everything on each. The subset keeps CI near its 30 minutes on 2 cores: the full non-slow suite
# takes about 20 of them on one interpreter there. Each interpreter comes from ci/pythons.sh
# (cached). A failing test fails this script; an interpreter that cannot be built here (no network
# to Debian's archive, no local 3.12) is reported on stderr and its run is not counted as passed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bytecode_facing=(tests/breaks tests/bytecode tests/python)
status=0
not_built=()

for version in ${STENOGRAPH_CI_PYTHONS:-3.15 3.13 3.14 3.12}; do
    if ! python=$("$repo/ci/pythons.sh" "$version" | tail -n 1) || [ ! -x "$python" ]; then
        echo "test_pythons.sh: Python $version could not be built here; its tests did NOT run" >&2
        not_built+=("$version")
        continue
    fi
    case $version in
        3.15) targets=("${bytecode_facing[@]}" tests/core tests/warm) ;;
        3.12) targets=("${bytecode_facing[@]}" tests/core) ;;
        *) targets=("${bytecode_facing[@]}") ;;
    esac
    if [ -n "${STENOGRAPH_CI_FOLDERS:-}" ]; then
        read -ra targets <<<"$STENOGRAPH_CI_FOLDERS"
    fi
    echo "=== Python $version: $("$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)') — ${targets[*]}"
    start=$SECONDS
    # absolute PYTHONPATH: the `stenograph run` tests start subprocesses from other folders
    if ! (cd "$repo" && PYTHONPATH="$repo/src" "$python" -m pytest -q -m "not slow" -n "${JOBS:-2}" -p no:cacheprovider "${targets[@]}"); then
        status=1
    fi
    echo "=== Python $version: $((SECONDS - start)) s"
done

if [ ${#not_built[@]} -gt 0 ]; then
    echo "test_pythons.sh: not run (interpreter unavailable): ${not_built[*]}" >&2
fi
exit $status
