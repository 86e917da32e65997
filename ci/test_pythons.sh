#!/usr/bin/env bash
# The suite on CPythons besides the default one (CI runs this after `make test`, which covers the
# oldest, 3.11, in full): the folders that meet the interpreter's own differences, the bytecode
# round trips and the graph breaks' resume code, on 3.15 (the newest, with torch 2.15) and 3.12
# (the GPU machine's Python). That keeps CI near its 30 minutes on 2 cores (`make test` takes about
# 20 of them); STENOGRAPH_CI_PYTHONS="3.13 3.14" adds the others, STENOGRAPH_CI_FOLDERS=tests runs
# the whole non-slow suite on each (docs/testing.md). $JOBS pytest workers. Each interpreter comes
# from ci/pythons.sh (cached). A failing test fails this script; an interpreter that cannot be
# built here (no network to Debian's archive, no local 3.12) is reported on stderr and its run is
# not counted as passed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bytecode_facing=(tests/bytecode tests/breaks)
status=0
not_built=()

for version in ${STENOGRAPH_CI_PYTHONS:-3.15 3.12}; do
    if ! python=$("$repo/ci/pythons.sh" "$version" | tail -n 1) || [ ! -x "$python" ]; then
        echo "test_pythons.sh: Python $version could not be built here; its tests did NOT run" >&2
        not_built+=("$version")
        continue
    fi
    targets=("${bytecode_facing[@]}")
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
