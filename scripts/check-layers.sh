#!/usr/bin/env bash
# Checks the include rules of DESIGN.md's layers on a source tree:
#   scripts/check-layers.sh [root]      (default: this repository)
# Exits 1, naming each offending line, when
#   - a file includes a header of a layer above its own (engine < storage <
#     ops < nn/io < nn/data, nn/dist < nn < nn/models; nn/data and nn/dist do
#     not include each other; MPI's part of nn/dist, in its own library, is
#     included only from tagflow/dist.h, tools, tests and fuzz targets);
#   - a public header includes an internal one (under detail/ or ops/kernels/);
#   - nn/models or tools include an internal header;
#   - a quoted include is not the path of a file from the root;
#   - tagflow/tagflow.h misses a public header or includes an opt-in one
#     (MPI and NCCL: tagflow/dist.h).
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
mapfile -t files < <(find engine storage ops nn tagflow tools tests fuzz \
  \( -name '*.h' -o -name '*.cc' -o -name '*.cu' \) -type f 2>/dev/null | LC_ALL=C sort)
mapfile -t headers < <(printf '%s\n' "${files[@]}" | grep -E '^(engine|storage|ops|nn|tagflow)/.*\.h$')

awk -v headers="${headers[*]}" '
function layer(path) {
  if (path == "tagflow/version.h") return 0
  if (path ~ /^engine\//) return 1
  if (path ~ /^storage\//) return 2
  if (path ~ /^ops\//) return 3
  if (path ~ /^nn\/io\//) return 4
  if (path ~ /^nn\/dist\/(mpi_|detail\/mpi_)/) return 6   # libtagflow_dist
  if (path ~ /^nn\/(data|dist)\//) return 5
  if (path ~ /^nn\/models\//) return 8
  if (path ~ /^nn\//) return 7
  if (path ~ /^tagflow\//) return 9                       # the umbrella headers
  return 10                                               # tools, tests, fuzz
}
function name(path) {
  if (path ~ /^nn\/dist\/(mpi_|detail\/mpi_)/) return "nn/dist (MPI, libtagflow_dist)"
  if (path ~ /^nn\/(io|data|dist|models)\//) { split(path, p, "/"); return "nn/" p[2] }
  split(path, p, "/"); return p[1]
}
function internal(path) { return path ~ /(^|\/)detail\// || path ~ /^ops\/kernels\// }
function optin(path) { return path ~ /^nn\/dist\/(mpi_aggregator|mpi_communicator|nccl_aggregator)\.h$/ }
function fail(msg) { printf "%s:%d: %s\n", FILENAME, FNR, msg; bad = 1 }
BEGIN {
  n = split(headers, list, " ")
  for (i = 1; i <= n; i++) exists[list[i]] = 1
}
/^[ \t]*#[ \t]*include[ \t]*"/ {
  inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
  if (!(inc in exists) && system("test -f \"" inc "\"") != 0) {
    fail("#include \"" inc "\": expected the path of a file from the root of the tree")
    next
  }
  from = layer(FILENAME); to = layer(inc)
  if (to > from || (to == 5 && from == 5 && name(inc) != name(FILENAME))) {
    fail(name(FILENAME) " includes \"" inc "\" of " name(inc) \
         ", a layer it must not depend on (DESIGN.md: each layer includes only those below it)")
  }
  if (FILENAME ~ /\.h$/ && !internal(FILENAME) && FILENAME !~ /^(tools|tests|fuzz)\// && internal(inc))
    fail("the public header includes \"" inc "\", an internal header (detail/, ops/kernels/)")
  if ((FILENAME ~ /^nn\/models\// || FILENAME ~ /^tools\//) && internal(inc))
    fail(name(FILENAME) " includes \"" inc "\", an internal header; it may use public headers only")
  if (FILENAME == "tagflow/tagflow.h") { umbrella[inc] = 1; if (optin(inc)) fail("the umbrella header includes \"" inc "\", which is opt in (tagflow/dist.h)") }
}
END {
  for (i = 1; i <= n; i++) {
    h = list[i]
    if (internal(h) || optin(h) || h ~ /^tagflow\//) continue
    if (!(h in umbrella)) { printf "tagflow/tagflow.h: misses the public header \"%s\"\n", h; bad = 1 }
  }
  exit bad
}' "${files[@]}"
