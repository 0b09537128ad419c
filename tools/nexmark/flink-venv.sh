#!/usr/bin/env bash
# Makes the scratch venv that tools/nexmark/flink_runner.py runs in (outside
# the repo): VENV, default ~/.cache/kappa-flink-venv, with apache-flink
# FLINK_VERSION (default 2.3.0, the newest 2.x on PyPI; it installs on Python 3.11)
# from PyPI. Idempotent: does nothing when the venv already imports that
# version. Prints the venv's python on stdout, so callers can do
#   PY=$(tools/nexmark/flink-venv.sh)
# PyFlink needs a Java 11+ runtime on PATH or in JAVA_HOME (Java 17 here).
set -euo pipefail
VENV=${VENV:-$HOME/.cache/kappa-flink-venv}
FLINK_VERSION=${FLINK_VERSION:-2.3.0}
PYTHON=${PYTHON:-python3}

have_version() {
    "$VENV/bin/python" -c 'import importlib.metadata as m, sys
sys.exit(m.version("apache-flink") != sys.argv[1])' "$FLINK_VERSION" 2>/dev/null
}

if ! have_version; then
    echo "flink-venv: installing apache-flink $FLINK_VERSION into $VENV" >&2
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip >&2
    "$VENV/bin/pip" install --quiet "apache-flink==$FLINK_VERSION" >&2
fi
echo "$VENV/bin/python"
