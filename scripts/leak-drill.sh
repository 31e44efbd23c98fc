#!/bin/bash
# The 3 a.m. drill, timed: from a leaked value alone to contained, against a running `partnerctl serve`.
# Usage: scripts/leak-drill.sh [secret|token] [sqlite|pg]   (pg: the local server at 127.0.0.1:5432, user postgres)
# Needs curl, jq, python3 (a stand-in engine). Builds nothing: run `npm run build` first.
set -euo pipefail
LEAK=${1:-secret}; BACKEND=${2:-sqlite}
P=$(cd "$(dirname "$0")/.." && pwd)/bin/partnerctl
D=$(mktemp -d)
export PARTNERCTL_SIGNING_KEY_FILE=$D/keys.json NO_COLOR=1
if [ "$BACKEND" = pg ]; then
  DB=partnerctl_drill_$$
  psql -qh 127.0.0.1 -U postgres -c "CREATE DATABASE $DB" >/dev/null
  export DATABASE_URL=postgresql://postgres@127.0.0.1:5432/$DB
else
  export DATABASE_URL=file:$D/partnerctl.db
fi
$P db migrate --create --json >/dev/null
python3 -m http.server 0 --bind 127.0.0.1 --directory "$D" >"$D/engine.log" 2>&1 & ENGINE=$!
until grep -q 'port' "$D/engine.log"; do sleep 0.1; done
EPORT=$(grep -o 'port [0-9]*' "$D/engine.log" | head -1 | cut -d' ' -f2)
cleanup() {
  kill "$SERVER" "$ENGINE" 2>/dev/null || true; wait 2>/dev/null || true
  [ "$BACKEND" = pg ] && psql -qh 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
  rm -rf "$D"
}
SERVER=0; trap cleanup EXIT
$P create-partner --name "Acme Pricing" --json >/dev/null
$P map-company "Acme Pricing" --company acme --json >/dev/null
$P issue-keys "Acme Pricing" --json >"$D/a.json"
PUBLIC_API_UPSTREAM_URL=http://127.0.0.1:$EPORT $P serve --port 0 >"$D/serve.log" 2>"$D/serve.err" & SERVER=$!
until grep -q listening "$D/serve.err"; do sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$D/serve.err" | head -1)
token() { curl -s "$URL/public/v1/auth/token" -H 'content-type: application/json' \
  -d "{\"access_key\":\"$(jq -r .access_key "$1")\",\"secret_key\":\"$(jq -r .secret_key "$1")\"}" | jq -r .access_token; }
get() { curl -s -o /dev/null -w '%{http_code}' "$URL/public/v1/?company_id=acme" -H "authorization: Bearer $1"; }
ms() { date +%s%3N; }

# A routine rotation earlier (pair A superseded, B active), tokens of both and a test token in flight.
TA=$(token "$D/a.json"); $P rotate-keys "Acme Pricing" --json >"$D/b.json"; TB=$(token "$D/b.json")
TT=$($P mint-test-token "Acme Pricing" 2>/dev/null)
echo "before: token of superseded A $(get "$TA"), of active B $(get "$TB"), test token $(get "$TT")"
if [ "$LEAK" = secret ]; then LEAKED=$(jq -r .secret_key "$D/b.json"); else LEAKED=$TB; fi

t0=$(ms); printf '%s' "$LEAKED" | $P lookup - --json >"$D/lookup.json"; t1=$(ms)
CONTAIN=$(jq -r .contain "$D/lookup.json")
echo "1. partnerctl lookup - --json   $((t1 - t0)) ms: kind=$(jq -r .kind "$D/lookup.json") partner=$(jq -r .partner_name "$D/lookup.json") status=$(jq -r .status "$D/lookup.json") genuine=$(jq -r .genuine "$D/lookup.json")"
t2=$(ms); eval "$P ${CONTAIN#partnerctl } --json" >"$D/contain.json"; t3=$(ms)
echo "2. $CONTAIN   $((t3 - t2)) ms: changed=$(jq -r .changed "$D/contain.json")"
n=0; while [ "$(get "$TB")" != 401 ]; do n=$((n + 1)); done; t4=$(ms)
echo "3. first 401 for the leaked token at the running server: $((t4 - t3)) ms after the command returned ($n requests still accepted before)"
if [ "$LEAK" = secret ]; then AFTER="new pair: $(get "$(token "$D/contain.json")")"; else AFTER="B re-exchanged: $(get "$(token "$D/b.json")")"; fi
echo "after: token of A $(get "$TA"), of B $(get "$TB"), test token $(get "$TT"); $AFTER"
echo "total, leaked value to contained: $((t4 - t0)) ms"
