#!/usr/bin/env bash
# Fail when src/api/schema.gen.ts differs from what the API's schema generates now: a
# serializer changed and the client's types were not regenerated (or the file was edited).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
committed="$here/../src/api/schema.gen.ts"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$here/gen-api-types.sh" "$tmp/schema.gen.ts"
if ! diff -u --label "src/api/schema.gen.ts (committed)" --label "src/api/schema.gen.ts (from the API now)" \
  "$committed" "$tmp/schema.gen.ts" >"$tmp/drift.diff"; then
  cat "$tmp/drift.diff"
  echo >&2
  echo "API types drift: frontend/src/api/schema.gen.ts no longer matches the API's OpenAPI schema." >&2
  echo "Run \`make api-types\` (or \`npm run gen:types\` in frontend/), fix what no longer typechecks, and commit." >&2
  exit 1
fi
echo "API types match the schema."
