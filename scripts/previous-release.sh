#!/usr/bin/env bash
# Builds the previous release's `central` and `poller-agent` from its git tag, once: the upgrade
# test (tests/tests/e2e/upgrade.rs) runs them beside this checkout's binaries. Cached in
# target/previous-release/<tag>/bin (kept across runs of the same checkout; a clean clone
# builds them once, about as long as a debug build of the workspace's binaries). Built from
# the tagged source with its own Cargo.lock (--locked), so the binaries are the release's.
#
#   scripts/previous-release.sh        prints the directory holding the two binaries
#
# The tag is PREVIOUS_RELEASE below; its commit is pinned beside it, so that a clone without
# tags (or a moved tag) still builds the same source.
set -euo pipefail
shopt -s inherit_errexit

PREVIOUS_RELEASE=v0.1.0
PREVIOUS_COMMIT=b2fa1f693da0b6ce13518baadf55c9b2f38bfcf4

cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/target/previous-release/$PREVIOUS_RELEASE
BIN=$CACHE/bin
if [[ -x $BIN/central && -x $BIN/poller-agent ]]; then
  echo "$BIN"
  exit 0
fi

if tagged=$(git rev-parse -q --verify "refs/tags/$PREVIOUS_RELEASE^{commit}" 2>/dev/null); then
  [[ $tagged == "$PREVIOUS_COMMIT" ]] || {
    echo "previous-release: tag $PREVIOUS_RELEASE is $tagged, not the pinned $PREVIOUS_COMMIT" >&2
    exit 1
  }
fi
git cat-file -e "$PREVIOUS_COMMIT^{commit}" 2>/dev/null || {
  echo "previous-release: commit $PREVIOUS_COMMIT ($PREVIOUS_RELEASE) is not in this clone's history" >&2
  exit 1
}

SRC=$CACHE/src
rm -rf "$SRC"
mkdir -p "$SRC" "$BIN"
git archive "$PREVIOUS_COMMIT" | tar -x -C "$SRC"
echo "previous-release: building $PREVIOUS_RELEASE ($PREVIOUS_COMMIT) in $CACHE" >&2
started=$(date +%s)
(cd "$SRC" && CARGO_TARGET_DIR=$CACHE/target cargo build --locked -q -p central -p poller-agent --bins >&2)
cp "$CACHE/target/debug/central" "$CACHE/target/debug/poller-agent" "$BIN/"
# The release's sources and intermediate files are not needed once its binaries are kept.
rm -rf "$SRC" "$CACHE/target"
echo "previous-release: built in $(($(date +%s) - started)) s" >&2
echo "$BIN"
