#!/usr/bin/env bash
# Start, inspect or stop a Janus ensemble on loopback.
#
#   deploy/local-cluster.sh start    # 3 members, prints the client endpoints
#   deploy/local-cluster.sh status
#   deploy/local-cluster.sh stop     # stops only the members this script started
#
# Environment:
#   NODES      ensemble size (default 3)
#   RUN_DIR    pid files, logs and data dirs (default .janus-cluster in the repo)
#   BASE_PORT  member i listens on etcd BASE_PORT+i-1, ZooKeeper BASE_PORT+100+i-1,
#              HTTP BASE_PORT+200+i-1, peers BASE_PORT+300+i-1 (default 32379)
#   JANUS_BIN  the binary (default bin/janus, built with go build if missing)
#   JANUS_ARGS extra flags for every member
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODES="${NODES:-3}"
RUN_DIR="${RUN_DIR:-$repo/.janus-cluster}"
BASE_PORT="${BASE_PORT:-32379}"
JANUS_BIN="${JANUS_BIN:-$repo/bin/janus}"
JANUS_ARGS="${JANUS_ARGS:-}"

port() { echo $((BASE_PORT + $2 + $1 - 1)); } # port <member> <offset>

# alive <pidfile>: the pid in it is running and is a janus started from RUN_DIR.
alive() {
	local pid
	[[ -f "$1" ]] || return 1
	pid="$(cat "$1")"
	kill -0 "$pid" 2>/dev/null || return 1
	# Where /proc exists, also make sure the pid was not reused by another program.
	[[ -r "/proc/$pid/cmdline" ]] || return 0
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--data-dir $RUN_DIR/"
}

list() { # list <offset> <separator> [prefix]
	local out="" i
	for ((i = 1; i <= NODES; i++)); do
		out+="${out:+$2}${3:-}127.0.0.1:$(port "$i" "$1")"
	done
	echo "$out"
}

ids() { # ids <offset>: id=host:port,...
	local out="" i
	for ((i = 1; i <= NODES; i++)); do
		out+="${out:+,}$i=127.0.0.1:$(port "$i" "$1")"
	done
	echo "$out"
}

start() {
	mkdir -p "$RUN_DIR"
	for ((i = 1; i <= NODES; i++)); do
		if alive "$RUN_DIR/node$i.pid"; then
			echo "member $i is already running (pid $(cat "$RUN_DIR/node$i.pid")); run '$0 stop' first" >&2
			exit 1
		fi
	done
	if [[ ! -x "$JANUS_BIN" ]]; then
		echo "building $JANUS_BIN"
		(cd "$repo" && go build -o "$JANUS_BIN" .)
	fi
	local peers etcds zks
	peers="$(ids 300)" etcds="$(ids 0)" zks="$(ids 100)"
	for ((i = 1; i <= NODES; i++)); do
		# shellcheck disable=SC2086 # JANUS_ARGS is a list of flags
		"$JANUS_BIN" --id "$i" --data-dir "$RUN_DIR/node$i/data" \
			--etcd-listen "127.0.0.1:$(port "$i" 0)" --zk-listen "127.0.0.1:$(port "$i" 100)" \
			--http-listen "127.0.0.1:$(port "$i" 200)" \
			--peers "$peers" --peer-etcd "$etcds" --peer-zk "$zks" $JANUS_ARGS \
			>>"$RUN_DIR/node$i.log" 2>&1 &
		echo $! >"$RUN_DIR/node$i.pid"
	done
	# Wait until every member answers /health (200 once a leader is elected).
	local deadline=$((SECONDS + 30)) healthy
	while :; do
		healthy=0
		for ((i = 1; i <= NODES; i++)); do
			# kill -0, not alive: right after the fork the child may not have
			# exec'ed janus yet, so its command line is still this script's.
			if ! kill -0 "$(cat "$RUN_DIR/node$i.pid")" 2>/dev/null; then
				echo "member $i exited; its log ($RUN_DIR/node$i.log):" >&2
				tail -n 20 "$RUN_DIR/node$i.log" >&2
				stop
				exit 1
			fi
			curl -fsS "http://127.0.0.1:$(port "$i" 200)/health" >/dev/null 2>&1 && healthy=$((healthy + 1))
		done
		((healthy == NODES)) && break
		if ((SECONDS > deadline)); then
			echo "warning: only $healthy of $NODES members are healthy after 30s; see $RUN_DIR/node*.log" >&2
			break
		fi
		sleep 0.2
	done
	echo "Janus ensemble of $NODES members on loopback (run dir $RUN_DIR)"
	echo "etcd endpoints:     $(list 0 ,)"
	echo "ZooKeeper connect:  $(list 100 ,)"
	echo "HTTP (health, /v3): $(list 200 ' ' http://)"
	echo
	echo "  etcdctl --endpoints=$(list 0 ,) member list -w table"
	echo "  zkCli.sh -server $(list 100 ,)"
	echo "  $0 stop"
}

status() {
	for ((i = 1; i <= NODES; i++)); do
		if alive "$RUN_DIR/node$i.pid"; then
			echo "member $i: running, pid $(cat "$RUN_DIR/node$i.pid"), $(curl -sS "http://127.0.0.1:$(port "$i" 200)/health" 2>&1)"
		else
			echo "member $i: not running"
		fi
	done
}

stop() {
	local i pid
	for ((i = 1; i <= NODES; i++)); do
		local f="$RUN_DIR/node$i.pid"
		[[ -f "$f" ]] || continue
		if alive "$f"; then
			pid="$(cat "$f")"
			kill -TERM "$pid" 2>/dev/null || true
			for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
			if kill -0 "$pid" 2>/dev/null; then
				echo "member $i (pid $pid) ignored SIGTERM for 10s; killing it" >&2
				kill -KILL "$pid" 2>/dev/null || true
			fi
			echo "stopped member $i (pid $pid)"
		fi
		rm -f "$f"
	done
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
status) status ;;
*)
	echo "usage: $0 [start|status|stop]" >&2
	exit 2
	;;
esac
