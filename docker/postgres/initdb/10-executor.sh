#!/bin/sh
# Creates the executor's role and database next to Temporal's on the first
# start of an empty data directory (the postgres image runs the files in
# /docker-entrypoint-initdb.d only then; `docker compose down -v` resets).
#
# EXECUTOR_DB_NAME, EXECUTOR_DB_USER and EXECUTOR_DB_PASSWORD come from the
# postgresql service's environment in docker/compose.yaml; the password is
# passed to psql as a variable, never written into this file. Temporal's own
# databases (temporal, temporal_visibility) belong to POSTGRES_USER and are
# created by the temporal service's schema setup.
set -e

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
	-v db="$EXECUTOR_DB_NAME" -v user="$EXECUTOR_DB_USER" -v password="$EXECUTOR_DB_PASSWORD" <<'SQL'
CREATE ROLE :"user" LOGIN PASSWORD :'password';
CREATE DATABASE :"db" OWNER :"user";
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
SQL
