#!/usr/bin/env bash
# The Landlock engine against no confinement, side by side in one run (docs/benchmarks.md,
# "The Landlock engine"): scope start-up (`bee exec -- true`), open+close in a loop, and a
# shell workload. Needs root, Landlock and hyperfine; builds bee in release mode.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --locked -p bee >/dev/null
bee=$PWD/target/release/bee
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/p.toml" <<'POLICY'
version = 1
[fs]
read = ["/usr/lib/**", "/usr/share/perl/**", "/etc/ld.so.cache", "/etc/os-release", "/proc/self/**"]
write = ["/dev/null"]
[exec]
allow = ["/usr/lib/x86_64-linux-gnu/**", "/usr/bin/true", "/usr/bin/perl", "/usr/bin/dash", "/usr/bin/cat", "/usr/bin/seq"]
POLICY
open_close='for (1..100000) { open(my $f, "<", "/etc/os-release") or die; close($f) }'
workload='for i in $(seq 1 200); do cat /etc/os-release > /dev/null; done'
ll=("$bee" exec --engine landlock --policy "$work/p.toml" --)
hyperfine --warmup 3 --runs "${RUNS:-30}" -N --export-markdown "$work/startup.md" \
  -n plain "/usr/bin/true" -n landlock "${ll[*]} /usr/bin/true"
hyperfine --warmup 2 --runs "${RUNS:-15}" --export-markdown "$work/open.md" \
  -n plain "/usr/bin/perl -e '$open_close'" -n landlock "${ll[*]} /usr/bin/perl -e '$open_close'"
hyperfine --warmup 2 --runs "${RUNS:-15}" --export-markdown "$work/workload.md" \
  -n plain "/usr/bin/dash -c '$workload'" -n landlock "${ll[*]} /usr/bin/dash -c '$workload'"
cat "$work/startup.md" "$work/open.md" "$work/workload.md"
