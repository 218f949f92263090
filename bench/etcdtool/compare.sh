#!/usr/bin/env bash
# compare.sh runs etcd's own benchmark tool (tools/benchmark of etcd v3.6.8,
# pinned by this directory's go.mod) against Janus and against a real etcd
# v3.7.3 single node on this machine, alternating A/B, and prints one line
# per measurement and a table of medians.
#
# Run from anywhere inside the repository:
#
#   bench/etcdtool/compare.sh              # 3 rounds
#   ROUNDS=5 bench/etcdtool/compare.sh
#
# It builds bin/janus and bin/benchmark; bin/etcd comes from `make tools`.
# Every round starts each server afresh on free loopback ports with its data
# in a new temporary directory, and stops only the processes it started.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-10}
CLIENTS=${CLIENTS:-100}
PUT_TOTAL=${PUT_TOTAL:-20000}
RANGE_TOTAL=${RANGE_TOTAL:-40000}
KEY_SIZE=${KEY_SIZE:-8}
VAL_SIZE=${VAL_SIZE:-256}
KEY_SPACE=${KEY_SPACE:-100000}

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
work=$(mktemp -d "${TMPDIR:-/tmp}/janus-etcdtool.XXXXXX")
results="$work/results.tsv"
server_pid=""

cleanup() {
	if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

[[ -x bin/etcd ]] || { echo "bin/etcd is missing: run make tools" >&2; exit 1; }
echo "building bin/janus and bin/benchmark" >&2
go build -o bin/janus .
(cd bench/etcdtool && go build -o ../../bin/benchmark go.etcd.io/etcd/v3/tools/benchmark)

# free_port asks the kernel for an unused loopback port.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_healthy polls url until it answers 200, or gives up after 30s.
wait_healthy() {
	local url=$1
	for _ in $(seq 300); do
		if curl -fsS -o /dev/null "$url" 2>/dev/null; then
			return 0
		fi
		if ! kill -0 "$server_pid" 2>/dev/null; then
			echo "server exited before it was healthy; log:" >&2
			cat "$work/server.log" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "server not healthy at $url" >&2
	return 1
}

# start_server NAME starts a fresh server and sets endpoint (and http for
# Janus, where /debug/pprof lives).
start_server() {
	local name=$1 data="$work/data-$1"
	rm -rf "$data"
	local p1 p2 p3
	p1=$(free_port) p2=$(free_port) p3=$(free_port)
	endpoint="127.0.0.1:$p1"
	case $name in
	janus)
		bin/janus --data-dir "$data" --etcd-listen "$endpoint" --zk-listen "127.0.0.1:$p2" \
			--http-listen "127.0.0.1:$p3" --enable-pprof --log-level warn >"$work/server.log" 2>&1 &
		server_pid=$!
		http="http://127.0.0.1:$p3"
		wait_healthy "$http/health"
		;;
	etcd)
		# Default settings but for the addresses and the data directory.
		bin/etcd --name bench --data-dir "$data" \
			--listen-client-urls "http://$endpoint" --advertise-client-urls "http://$endpoint" \
			--listen-peer-urls "http://127.0.0.1:$p2" --initial-advertise-peer-urls "http://127.0.0.1:$p2" \
			--initial-cluster "bench=http://127.0.0.1:$p2" --log-level warn >"$work/server.log" 2>&1 &
		server_pid=$!
		http="http://$endpoint"
		wait_healthy "$http/health"
		;;
	esac
}

stop_server() {
	kill "$server_pid"
	wait "$server_pid" 2>/dev/null || true
	server_pid=""
}

# run_bench SERVER ROUND WORKLOAD ARGS... runs one benchmark and records
# requests/s, average and p99 latency (ms).
run_bench() {
	local server=$1 round=$2 workload=$3
	shift 3
	local out
	out=$(bin/benchmark --endpoints "$endpoint" --conns "$CONNS" --clients "$CLIENTS" "$@" 2>&1) || {
		echo "$out" >&2
		return 1
	}
	awk -v s="$server" -v r="$round" -v w="$workload" '
		/Requests\/sec:/ { rps = $2 }
		/Average:/ { avg = $2 * 1000 }
		/ 99% in / { p99 = $3 * 1000 }
		END { printf "%s\t%s\t%s\t%.1f\t%.2f\t%.2f\n", s, r, w, rps, avg, p99 }' <<<"$out" | tee -a "$results"
}

one_round() {
	local server=$1 round=$2
	start_server "$server"
	run_bench "$server" "$round" put put --total "$PUT_TOTAL" --key-size "$KEY_SIZE" --val-size "$VAL_SIZE" \
		--sequential-keys --key-space-size "$KEY_SPACE"
	# The key the range runs read, with a value of the same size.
	local key
	key=$(head -c "$KEY_SIZE" /dev/zero | tr '\0' 'r')
	bin/etcdctl --endpoints "$endpoint" put "$key" "$(head -c "$VAL_SIZE" /dev/zero | tr '\0' 'v')" >/dev/null
	run_bench "$server" "$round" range-l range "$key" --total "$RANGE_TOTAL" --consistency l
	run_bench "$server" "$round" range-s range "$key" --total "$RANGE_TOTAL" --consistency s
	stop_server
}

printf 'server\tround\tworkload\treq/s\tavg ms\tp99 ms\n'
for round in $(seq "$ROUNDS"); do
	# Alternate which server goes first, so drift on a shared machine
	# falls on both.
	if ((round % 2)); then order="janus etcd"; else order="etcd janus"; fi
	for server in $order; do
		one_round "$server" "$round"
	done
done

echo
echo "medians over $ROUNDS rounds (conns=$CONNS clients=$CLIENTS key=$KEY_SIZE B value=$VAL_SIZE B; put total=$PUT_TOTAL, range total=$RANGE_TOTAL)"
python3 - "$results" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
m, by_round = {}, {}
for s, r, w, rps, avg, p99 in rows:
    m.setdefault((w, s), []).append((float(rps), float(avg), float(p99)))
    by_round[(w, s, r)] = float(rps)
# The per-round ratio pairs the two runs that were closest in time, which
# cancels more of the machine's drift than a ratio of medians does.
print("| workload | etcd req/s | Janus req/s | Janus/etcd (medians) | Janus/etcd per round: median (min-max) | etcd avg ms | Janus avg ms | etcd p99 ms | Janus p99 ms |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for w in ("put", "range-l", "range-s"):
    e, j = m.get((w, "etcd")), m.get((w, "janus"))
    if not e or not j:
        continue
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    rounds = sorted({r for (w2, s, r) in by_round if w2 == w})
    ratios = [by_round[(w, "janus", r)] / by_round[(w, "etcd", r)] for r in rounds
              if (w, "janus", r) in by_round and (w, "etcd", r) in by_round]
    print(f"| {w} | {med(e,0):.0f} | {med(j,0):.0f} | {med(j,0)/med(e,0):.2f} | "
          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
          f"{med(e,1):.2f} | {med(j,1):.2f} | {med(e,2):.2f} | {med(j,2):.2f} |")
EOF
