#!/usr/bin/env bash
# Starts a real, PostgreSQL-backed Temporal server (go.temporal.io/server, the
# version `make cluster` builds into ./bin) in the background, for running
# `executor serve` against something closer to production than the dev server.
# Idempotent: databases, schemas, namespace and search attributes that exist are
# kept, and a server that already answers is left running.
#
#   CLUSTER_DATABASE_URL  PostgreSQL the server stores into
#                         (default postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable;
#                         its host, port, user and password are used, not its database)
#   CLUSTER_DB            history database (temporal_cluster)
#   CLUSTER_VISIBILITY_DB visibility database (temporal_cluster_visibility)
#   CLUSTER_DIR           config, logs and pid file (./.data/cluster)
#   CLUSTER_PORT          frontend gRPC port (7333); the other services use
#                         CLUSTER_PORT+1…+6 and membership CLUSTER_PORT+100…+106
#   CLUSTER_NAMESPACE     namespace to register (default)
#   CLUSTER_EXECUTOR_DB   database created for `executor serve` (executor)
#   CLUSTER_UI_PORT       the Temporal Web UI's HTTP port (CLUSTER_PORT+1000: 8333)
#   TEMPORAL_SERVER_VERSION  module version whose config and schemas are used (v1.29.1)
#   BIN                   where server, sql, ui/server and temporal are (./bin)
#
# The settings used are saved in .data/cluster.env: a later `make cluster`,
# `make cluster-test` or `make cluster-stop` without them set uses the same
# ones (a variable set in the environment wins).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SAVED="$ROOT/.data/cluster.env"
if [ -f "$SAVED" ]; then
  while IFS= read -r line; do
    name="${line%%=*}"
    case "$name" in
      CLUSTER_DATABASE_URL | CLUSTER_DB | CLUSTER_VISIBILITY_DB | CLUSTER_DIR | CLUSTER_PORT | CLUSTER_NAMESPACE | CLUSTER_EXECUTOR_DB | CLUSTER_UI_PORT) ;;
      *) continue ;;
    esac
    [ -n "${!name:-}" ] || eval "export $line"
  done <"$SAVED"
fi

URL="${CLUSTER_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
DB="${CLUSTER_DB:-temporal_cluster}"
VISDB="${CLUSTER_VISIBILITY_DB:-temporal_cluster_visibility}"
DIR="${CLUSTER_DIR:-$ROOT/.data/cluster}"
PORT="${CLUSTER_PORT:-7333}"
NS="${CLUSTER_NAMESPACE:-default}"
EXECDB="${CLUSTER_EXECUTOR_DB:-executor}"
UIPORT="${CLUSTER_UI_PORT:-$((PORT + 1000))}"
VERSION="${TEMPORAL_SERVER_VERSION:-v1.29.1}"
BIN="${BIN:-$ROOT/bin}"
SERVER="$BIN/server"
UI="$BIN/ui/server"
SQLTOOL="$BIN/sql"
TEMPORAL="${TEMPORAL_CLI:-$BIN/temporal}"
ADDR="127.0.0.1:$PORT"

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

for b in "$SERVER" "$SQLTOOL" "$TEMPORAL" "$UI"; do
  [ -x "$b" ] || die "$b missing: run \`make cluster\` (it builds them)"
done
if [ "$PORT" -gt 32660 ]; then
  die "CLUSTER_PORT=$PORT: membership ports (port+100…) must stay below 32768 (PostgreSQL smallint)"
fi

# --- postgres://user[:password]@host[:port]/db?params ---------------------------
rest="${URL#*://}"
rest="${rest%%\?*}"
creds=""
if [[ "$rest" == *@* ]]; then creds="${rest%@*}"; rest="${rest##*@}"; fi
hostport="${rest%%/*}"
PGUSER="${creds%%:*}"
PGPASSWORD=""
if [[ "$creds" == *:* ]]; then PGPASSWORD="${creds#*:}"; fi
PGUSER="${PGUSER:-postgres}"
PGHOST="${hostport%%:*}"
PGPORT=5432
if [[ "$hostport" == *:* ]]; then PGPORT="${hostport##*:}"; fi
PGHOST="${PGHOST:-127.0.0.1}"
urldecode() { printf '%b' "${1//%/\\x}"; }
PGUSER="$(urldecode "$PGUSER")"
PGPASSWORD="$(urldecode "$PGPASSWORD")"
# For sed replacements and YAML double quotes.
sedesc() {
  printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/[\\&|]/\\&/g'
}

MODDIR="$(go env GOMODCACHE)/go.temporal.io/server@$VERSION"
if [ ! -d "$MODDIR/schema" ]; then
  log "downloading go.temporal.io/server@$VERSION for its schemas and config"
  MODDIR="$(cd "$(mktemp -d)" && go mod download -json "go.temporal.io/server@$VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
fi
[ -d "$MODDIR/schema/postgresql/v12" ] || die "no schemas under $MODDIR"

health() { "$TEMPORAL" operator cluster health --address "$ADDR" >/dev/null 2>&1; }

mkdir -p "$DIR/config/dynamicconfig"
if [ -f "$DIR/server.pid" ] && kill -0 "$(cat "$DIR/server.pid")" 2>/dev/null && health; then
  log "server already running (pid $(cat "$DIR/server.pid")) on $ADDR"
else
  # --- databases and schemas --------------------------------------------------
  export SQL_PLUGIN=postgres12 SQL_HOST="$PGHOST" SQL_PORT="$PGPORT" SQL_USER="$PGUSER" SQL_PASSWORD="$PGPASSWORD"
  for pair in "$DB:temporal" "$VISDB:visibility"; do
    db="${pair%%:*}"; kind="${pair##*:}"
    log "database $db on $PGHOST:$PGPORT: create, setup-schema, update-schema ($kind)"
    "$SQLTOOL" --db "$db" create-database >"$DIR/sql-$db.log" 2>&1 || { cat "$DIR/sql-$db.log" >&2; die "create-database $db failed"; }
    "$SQLTOOL" --db "$db" setup-schema -v 0.0 >>"$DIR/sql-$db.log" 2>&1 || { cat "$DIR/sql-$db.log" >&2; die "setup-schema $db failed"; }
    "$SQLTOOL" --db "$db" update-schema -d "$MODDIR/schema/postgresql/v12/$kind/versioned" >>"$DIR/sql-$db.log" 2>&1 ||
      { cat "$DIR/sql-$db.log" >&2; die "update-schema $db failed"; }
  done

  # The executor's own database, so that the `executor serve` line printed
  # below works as printed (it applies its migrations itself).
  log "database $EXECDB on $PGHOST:$PGPORT for executor serve: create"
  "$SQLTOOL" --db "$EXECDB" create-database >"$DIR/sql-$EXECDB.log" 2>&1 || { cat "$DIR/sql-$EXECDB.log" >&2; die "create-database $EXECDB failed"; }

  # --- config -----------------------------------------------------------------
  sed -e "s|@DB@|$DB|g" -e "s|@VISDB@|$VISDB|g" \
    -e "s|@PGHOST@|$PGHOST|g" -e "s|@PGPORT@|$PGPORT|g" -e "s|@PGUSER@|$(sedesc "$PGUSER")|g" -e "s|@PGPASSWORD@|$(sedesc "$PGPASSWORD")|g" \
    -e "s|@FRONTEND_PORT@|$PORT|g" -e "s|@HISTORY_PORT@|$((PORT + 1))|g" -e "s|@MATCHING_PORT@|$((PORT + 2))|g" \
    -e "s|@WORKER_PORT@|$((PORT + 6))|g" -e "s|@FRONTEND_HTTP_PORT@|$((PORT + 10))|g" -e "s|@METRICS_PORT@|$((PORT + 66))|g" \
    -e "s|@FRONTEND_MEMBERSHIP_PORT@|$((PORT + 100))|g" -e "s|@HISTORY_MEMBERSHIP_PORT@|$((PORT + 101))|g" \
    -e "s|@MATCHING_MEMBERSHIP_PORT@|$((PORT + 102))|g" -e "s|@WORKER_MEMBERSHIP_PORT@|$((PORT + 106))|g" \
    -e "s|@DIR@|$DIR|g" \
    cluster/development.yaml.tmpl >"$DIR/config/development.yaml"
  { cat "$MODDIR/config/dynamicconfig/development-sql.yaml"; echo; cat cluster/dynamicconfig-extra.yaml; } \
    >"$DIR/config/dynamicconfig/development-sql.yaml"
  chmod u+w "$DIR/config/development.yaml" "$DIR/config/dynamicconfig/development-sql.yaml"

  # --- start ------------------------------------------------------------------
  if health; then
    die "something else already answers on $ADDR (another cluster? \`make cluster-stop\`, or set CLUSTER_PORT)"
  fi
  log "starting $SERVER on $ADDR (log: $DIR/server.log)"
  setsid nohup "$SERVER" --root "$DIR" --config config --env development --allow-no-auth start \
    >"$DIR/server.log" 2>&1 </dev/null &
  echo $! >"$DIR/server.pid"
  start=$(date +%s)
  until health; do
    if ! kill -0 "$(cat "$DIR/server.pid")" 2>/dev/null; then
      tail -n 30 "$DIR/server.log" >&2
      die "server exited during start"
    fi
    if [ $(($(date +%s) - start)) -gt 120 ]; then
      tail -n 30 "$DIR/server.log" >&2
      die "server did not answer on $ADDR within 120s"
    fi
    sleep 1
  done
  log "server answers on $ADDR after $(($(date +%s) - start))s"
fi

# --- namespace and search attributes --------------------------------------------
if ! "$TEMPORAL" operator namespace describe --address "$ADDR" -n "$NS" >/dev/null 2>&1; then
  log "registering namespace $NS"
  "$TEMPORAL" operator namespace create --address "$ADDR" -n "$NS" --retention 72h >/dev/null
fi
# The namespace reaches every service's cache within seconds; until then calls in it fail.
start=$(date +%s)
until "$TEMPORAL" operator search-attribute list --address "$ADDR" -n "$NS" >"$DIR/search-attributes.txt" 2>/dev/null; do
  [ $(($(date +%s) - start)) -gt 60 ] && die "namespace $NS not usable after 60s"
  sleep 1
done
# models/search.go: HierarchyId Keyword, RunStatus Keyword, HierarchyName Text, TenantId Keyword,
# TotalTokens Int, CostUsd Double, ForkedFrom Keyword.
missing=()
for sa in HierarchyId:Keyword RunStatus:Keyword HierarchyName:Text TenantId:Keyword TotalTokens:Int CostUsd:Double ForkedFrom:Keyword; do
  name="${sa%%:*}"; type="${sa##*:}"
  if ! grep -qE "^ *$name +$type\b" "$DIR/search-attributes.txt"; then missing+=(--name "$name" --type "$type"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  log "creating search attributes: ${missing[*]}"
  "$TEMPORAL" operator search-attribute create --address "$ADDR" -n "$NS" "${missing[@]}" >/dev/null
fi
# Wait until a workflow list in the namespace answers (frontend namespace cache).
start=$(date +%s)
until "$TEMPORAL" workflow list --address "$ADDR" -n "$NS" --limit 1 >/dev/null 2>&1; do
  [ $(($(date +%s) - start)) -gt 60 ] && die "namespace $NS not usable after 60s"
  sleep 1
done

# --- the Temporal Web UI (github.com/temporalio/ui-server/v2) -----------------
UIURL="http://127.0.0.1:$UIPORT"
uiup() { curl -fsS -o /dev/null "$UIURL/" 2>/dev/null; }
if [ -f "$DIR/ui.pid" ] && kill -0 "$(cat "$DIR/ui.pid")" 2>/dev/null && uiup; then
  log "Web UI already running (pid $(cat "$DIR/ui.pid")) on $UIURL"
else
  if uiup; then
    die "something else already answers on $UIURL (set CLUSTER_UI_PORT)"
  fi
  mkdir -p "$DIR/ui/config"
  printf 'temporalGrpcAddress: %s\nhost: 127.0.0.1\nport: %s\nenableUi: true\ndefaultNamespace: %s\n' \
    "$ADDR" "$UIPORT" "$NS" >"$DIR/ui/config/base.yaml"
  : >"$DIR/ui/config/development.yaml"
  log "starting the Temporal Web UI on $UIURL (log: $DIR/ui.log)"
  setsid nohup "$UI" --root "$DIR/ui" --config config --env development start >"$DIR/ui.log" 2>&1 </dev/null &
  echo $! >"$DIR/ui.pid"
  start=$(date +%s)
  until uiup; do
    if ! kill -0 "$(cat "$DIR/ui.pid")" 2>/dev/null; then
      tail -n 20 "$DIR/ui.log" >&2
      die "the Web UI exited during start"
    fi
    if [ $(($(date +%s) - start)) -gt 30 ]; then
      tail -n 20 "$DIR/ui.log" >&2
      die "the Web UI did not answer on $UIURL within 30s"
    fi
    sleep 1
  done
fi

# --- saved settings --------------------------------------------------------------
mkdir -p "$(dirname "$SAVED")"
(
  umask 077 # the URL may hold a password
  for v in CLUSTER_DATABASE_URL=URL CLUSTER_DB=DB CLUSTER_VISIBILITY_DB=VISDB CLUSTER_DIR=DIR CLUSTER_PORT=PORT \
    CLUSTER_NAMESPACE=NS CLUSTER_EXECUTOR_DB=EXECDB CLUSTER_UI_PORT=UIPORT CLUSTER_TEMPORAL_ADDRESS=ADDR; do
    ref="${v#*=}"
    printf '%s=%q\n' "${v%%=*}" "${!ref}"
  done >"$SAVED"
)

dburl="postgres://$PGUSER@$PGHOST:$PGPORT/$EXECDB?sslmode=disable"
note=""
if [ -n "$PGPASSWORD" ]; then
  dburl="postgres://$PGUSER:<password>@$PGHOST:$PGPORT/$EXECDB?sslmode=disable"
  note=" (put the database password where it says <password>)"
fi
cat >&2 <<EOF
cluster: ready. Temporal $VERSION on $ADDR (namespace $NS; PostgreSQL $PGHOST:$PGPORT, databases $DB and $VISDB).
cluster: Temporal Web UI on $UIURL
cluster: point the executor at it$note, e.g.:
  TEMPORAL_ADDRESS=$ADDR TEMPORAL_NAMESPACE=$NS DATABASE_URL='$dburl' \\
    ./bin/executor serve -role all
cluster: server log $DIR/server.log; settings saved in .data/cluster.env; stop it with \`make cluster-stop\`.
EOF
