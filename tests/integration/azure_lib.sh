# shellcheck shell=bash
# tests/integration/azure_lib.sh: Azurite (the Azure Blob emulator, which
# verifies Shared Key and SAS signatures) for the t_azure_* tests. Source it
# after lib.sh and fixtures.sh.
#
#   azurite_start [PORT]       start Azurite on 127.0.0.1 (data in the work dir);
#                              exports AZURITE_PORT AZURITE_URL (…/devstoreaccount1) AZURITE_PID
#   azurite_stop               stop it (by PID)
#   azproxy_start [ARGS…]      tests/integration/azproxy.py in front of Azurite (--delay-put S,
#                              --cut-first-get); exports AZPROXY_URL AZPROXY_PID AZPROXY_LOG
#   az CMD ARGS…               tests/integration/azblob.py (mkcontainer, list, blocks, sas, wait)
#   az_container NAME          create container NAME; prints its URL
#   azure_env                  the environment every daemon of these tests gets:
#                              Azurite's account key, and every token endpoint
#                              pointed at a closed local port, so that nothing
#                              ever asks a real metadata service
#   azure_config FILE TIERDIR CONTAINER_URL [YAML…]  a local tier above an azure_blob tier
#
# Azurite comes from scripts/setup.sh --test (npm, into build-deps/azurite);
# AZURITE overrides the path of its azurite-blob script.

AZ_KEY_WELL_KNOWN="Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE=${AZURITE:-$DV_ROOT/build-deps/azurite/node_modules/.bin/azurite-blob}

az() {
	python3 "$DV_ROOT/tests/integration/azblob.py" "$@"
}

azurite_start() {
	local port=${1:-} dir pid start i code
	[ -x "$AZURITE" ] || bail "Azurite is not installed at $AZURITE (scripts/setup.sh --test)"
	dv_need node curl python3
	dir=${AZURITE_DIR:-$(dv_tmp azurite)}
	for _ in 1 2 3; do
		[ -n "$port" ] || port=$(_dv_free_port)
		"$AZURITE" --blobHost 127.0.0.1 --blobPort "$port" --location "$dir" \
			--skipApiVersionCheck --disableTelemetry --loose --silent \
			>>"$dir/azurite.log" 2>&1 &
		pid=$!
		dv_track "$pid" azurite
		for ((i = 0; i < 300; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/devstoreaccount1?comp=list" 2>/dev/null)
			if [ "$code" = 403 ] || [ "$code" = 200 ]; then
				export AZURITE_PORT=$port AZURITE_PID=$pid AZURITE_DIR=$dir
				export AZURITE_URL="http://127.0.0.1:$port/devstoreaccount1"
				return 0
			fi
			sleep 0.1
		done
		dv_stop_pid "$pid" 5
		port=${1:-}
	done
	fail "azurite_start: Azurite did not answer" "$(tail -20 "$dir/azurite.log")"
	return 1
}

azurite_stop() {
	[ -n "${AZURITE_PID:-}" ] || return 0
	dv_stop_pid "$AZURITE_PID" 10
	unset AZURITE_PID
}

azproxy_start() {
	local dir pid i port=""
	dir=$(dv_tmp azproxy) || return 1
	AZPROXY_LOG="$dir/requests.log"
	: >"$AZPROXY_LOG"
	python3 "$DV_ROOT/tests/integration/azproxy.py" "$AZURITE_PORT" --log "$AZPROXY_LOG" "$@" \
		>"$dir/port" 2>"$dir/stderr" &
	pid=$!
	dv_track "$pid" azproxy
	for ((i = 0; i < 100; i++)); do
		port=$(head -1 "$dir/port" 2>/dev/null)
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || { fail "azproxy_start: no port" "$(cat "$dir/stderr")"; return 1; }
	export AZPROXY_PID=$pid AZPROXY_LOG AZPROXY_URL="http://127.0.0.1:$port/devstoreaccount1"
}

az_container() {
	az mkcontainer "$AZURITE_URL/$1" >&2 || return 1
	echo "$AZURITE_URL/$1"
}

azure_env() {
	local closed="http://127.0.0.1:9"
	export AZURE_STORAGE_KEY=$AZ_KEY_WELL_KNOWN
	unset AZURE_STORAGE_ACCOUNT AZURE_STORAGE_CONNECTION_STRING AZURE_STORAGE_SAS_TOKEN \
		AZURE_CLIENT_SECRET AZURE_FEDERATED_TOKEN_FILE IDENTITY_ENDPOINT IDENTITY_HEADER \
		AZURE_TENANT_ID AZURE_CLIENT_ID
	export AZURE_POD_IDENTITY_AUTHORITY_HOST=$closed AZURE_AUTHORITY_HOST=$closed
}

azure_config() {
	local file=$1 tier=$2 url=$3
	shift 3
	{
		echo "tiers:"
		echo "  - name: local"
		echo "    path: $tier"
		echo "  - name: region"
		echo "    type: azure_blob"
		echo "    container_url: $url"
		for line in "$@"; do echo "$line"; done
		echo "http:"
		echo "  connect_timeout: 2"
		echo "  low_speed_time: 3"
		echo "  retries: 1"
	} >"$file"
}
