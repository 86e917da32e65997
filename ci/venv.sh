#!/usr/bin/env bash
# The project's virtual environment, which `make install`, `make test`, `make demo` and the other
# make targets run in: stenograph installed editable with its test dependencies and torch pinned.
# Nothing is installed outside it (pip keeps its download cache in the user's cache folder), so it
# works where the system Python is externally managed (PEP 668: Debian 12, Ubuntu 24.04) as well
# as with pyenv, conda or a python.org build.
#
#   ci/venv.sh [PYTHON [VENV [TORCH]]]     # defaults: python3 .venv 2.13.0
#
# Idempotent and quiet when nothing changed: the venv is made once, from PYTHON, and installed
# into again only when pyproject.toml or the torch pin changes (a stamp file in the venv records
# what was installed). It is made again when its interpreter no longer runs or PYTHON is another
# minor version. Where PYTHON has no ensurepip (Debian and Ubuntu without python3-venv), the venv
# is made without pip and pip is put into it by PYTHON's own pip (`pip --python`, pip 22.3+) or
# from Debian's pip wheel (python3-pip-whl).
set -euo pipefail

python=${1:-python3}
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${2:-.venv}
torch=${3:-2.13.0}
case $venv in /*) ;; *) venv=$repo/$venv ;; esac
vpython=$venv/bin/python

say() { echo "venv.sh: $*" >&2; }
fail() {
    say "$*"
    exit 1
}

minor() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }

# The interpreter the venv is made from (only needed when it is made, or to compare versions).
base_minor=""
if command -v "$python" >/dev/null 2>&1; then
    base_minor=$(minor "$python") || true
fi

# Reuse the venv while its interpreter runs and is the same minor version as PYTHON.
fresh=0
if [ -x "$vpython" ] && venv_minor=$(minor "$vpython") && [ -n "$venv_minor" ]; then
    if [ -z "$base_minor" ]; then
        say "warning: '$python' does not run here; keeping $venv (Python $venv_minor)"
    elif [ "$venv_minor" != "$base_minor" ]; then
        say "$venv is Python $venv_minor, $python is $base_minor: making it again"
        fresh=1
    fi
elif [ -e "$venv" ]; then
    say "$venv does not run (its interpreter was removed?): making it again"
    fresh=1
else
    fresh=1
fi

make_venv() {
    [ -n "$base_minor" ] || fail "no working '$python' on PATH; install Python 3.11 or newer, or pass one: make PY=/path/to/python3"
    "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
        fail "$python is Python $base_minor; stenograph needs 3.11 or newer: make PY=/path/to/python3.11"
    # Only a virtual environment is removed: VENV=some/other/folder must not lose its files.
    if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ] && [ -n "$(ls -A "$venv" 2>/dev/null)" ]; then
        fail "$venv is in the way and is no virtual environment (no pyvenv.cfg): move it, or choose another VENV=..."
    fi
    rm -rf "$venv"
    say "making $venv with $("$python" -c 'import sys; print(sys.executable)') (Python $base_minor)"
    local log
    log=$(mktemp)
    if "$python" -m venv "$venv" >"$log" 2>&1 && "$vpython" -m pip --version >/dev/null 2>&1; then
        rm -f "$log"
        return
    fi
    # No ensurepip: Debian and Ubuntu split it into python3-venv. A venv without pip, then pip.
    say "'$python -m venv' could not install pip into the venv ($(tr -s ' \n' ' ' <"$log" | sed 's/\. .*/./'))"
    rm -f "$log"
    rm -rf "$venv"
    "$python" -m venv --without-pip "$venv" || fail "'$python -m venv --without-pip $venv' failed"
    if "$python" -m pip --version >/dev/null 2>&1 &&
        "$python" -m pip --python "$vpython" install -q pip >&2; then
        say "pip installed into $venv by $python's own pip (--python)"
        return
    fi
    local wheel
    wheel=$(ls /usr/share/python-wheels/pip-*.whl 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$wheel" ] && "$vpython" "$wheel/pip" install -q --no-index "$wheel" >&2; then
        say "pip installed into $venv from $wheel"
        return
    fi
    rm -rf "$venv"
    fail "cannot put pip into a virtual environment with $python: it has no ensurepip and no pip
of its own (22.3 or newer). On Debian or Ubuntu: sudo apt install python3-venv (or python3-pip),
or use another Python 3.11+: make PY=/path/to/python3"
}

# Install when what is asked for changed: the stamp names pyproject.toml's hash and the torch pin.
stamp=$venv/.installed-torch$torch-$(sha1sum "$repo/pyproject.toml" | cut -c1-12)

# A venv left without pip (a first run stopped half-way) is made again too.
if [ "$fresh" = 0 ] && [ ! -f "$stamp" ] && ! "$vpython" -m pip --version >/dev/null 2>&1; then
    say "$venv has no pip: making it again"
    fresh=1
fi
if [ "$fresh" = 1 ]; then
    make_venv
fi

if [ ! -f "$stamp" ]; then
    say "installing torch==$torch and stenograph (editable, with the test extra) into $venv"
    start=$SECONDS
    (cd "$repo" && "$vpython" -m pip install -q "torch==$torch" -e '.[test]')
    rm -f "$venv"/.installed-*
    touch "$stamp"
    say "done in $((SECONDS - start)) s"
fi
