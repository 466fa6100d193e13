#!/bin/sh
# Lays out the review example's workspace: the crate's files with its git history beside them
# as .git (a repository cannot be committed inside another, so the history is kept packed in
# history/ and copied into place). Writes examples/review/workspace, which git ignores.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ws="$here/workspace"
rm -rf "$ws"
cp -R "$here/crate" "$ws"
cp -R "$here/history" "$ws/.git"
mkdir -p "$ws/.git/refs/heads" "$ws/.git/refs/tags"
echo "wrote $ws (the crate hookd at $(cut -c1-12 "$ws/.git/packed-refs" | tail -n 1))"
