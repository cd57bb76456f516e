#!/usr/bin/env bash
# make demo: the project's main job on a sample image.
set -euo pipefail
BUILD=${1:-build}
echo "== cipher self-test (unit tests) =="
meson test -C "$BUILD" --suite unit
