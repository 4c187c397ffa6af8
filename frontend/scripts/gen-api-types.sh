#!/usr/bin/env bash
# Write the client's API types (src/api/schema.gen.ts, or the file given) from the OpenAPI
# schema Django generates offline: no server, no database.
#   1. `manage.py spectacular --validate` dumps the schema, in a clean environment so that no
#      local BARREL_* setting leaks into it;
#   2. openapi-typescript turns it into types.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$root/frontend/src/api/schema.gen.ts}
case $out in /*) ;; *) out="$PWD/$out" ;; esac
python=${BARREL_PYTHON:-$root/.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$root" && env -i PATH="$PATH" HOME="${HOME:-/tmp}" PYTHONUTF8=1 "$python" manage.py spectacular \
  --validate --file "$tmp/schema.yaml" 2>"$tmp/spectacular.log") || {
  cat "$tmp/spectacular.log" >&2
  exit 1
}
(cd "$root/frontend" && node_modules/.bin/openapi-typescript "$tmp/schema.yaml" -o "$out" >/dev/null)
