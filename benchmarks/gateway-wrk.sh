#!/usr/bin/env bash
# The gateway's overhead, measured with wrk: the same fast backend behind a
# bare httputil.ReverseProxy, the groupexec gateway, and nginx (Debian's
# package, with a per-tenant limit_conn), each its own process, each run in
# turn within every round, so that the three meet the same noise.
#
#   benchmarks/gateway-wrk.sh [ROUNDS] [DURATION]    (defaults: 5 rounds of 10s)
#
# It installs wrk and nginx with apt-get when they are missing (run it as
# root, or install them first). Environment: CONNS (32), THREADS (2),
# OUT (the raw output; default benchmarks/results/gateway-wrk.txt),
# PROFILE=DIR (write the gateway's CPU and allocation profiles to DIR),
# WRK, NGINX, GATEWAYWRK (commands to use instead of the installed ones and
# a fresh build), PROXY_CPUS and LOAD_CPUS (taskset CPU lists: the proxies
# on some CPUs, wrk and the backend on others).
# It prints one table: median requests/s and p99 of each, and the median
# over the rounds of each round's ratio to the bare proxy.
set -euo pipefail

ROUNDS=${1:-5}
DURATION=${2:-10s}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT=${OUT:-$here/results/gateway-wrk.txt}

missing=()
[[ -n "${WRK:-}" ]] || command -v wrk >/dev/null || missing+=(wrk)
[[ -n "${NGINX:-}" ]] || command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx)
if ((${#missing[@]})); then
	echo "installing ${missing[*]} from Debian's packages" >&2
	apt-get install -y "${missing[@]}" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "${missing[@]}" >/dev/null; }
fi
WRK=${WRK:-wrk}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
proxy_on=() load_on=()
[[ -n "${PROXY_CPUS:-}" ]] && proxy_on=(${TASKSET:-taskset} -c "$PROXY_CPUS")
[[ -n "${LOAD_CPUS:-}" ]] && load_on=(${TASKSET:-taskset} -c "$LOAD_CPUS")

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

GW=${GATEWAYWRK:-}
if [[ -z "$GW" ]]; then
	(cd "$here" && go build -o "$tmp/gatewaywrk" ./gatewaywrk)
	GW=$tmp/gatewaywrk
fi

BACKEND=127.0.0.1:18081
declare -A PORT=([bare]=18082 [gateway]=18083 [nginx]=18084)

"${load_on[@]}" "$GW" backend -listen $BACKEND & pids+=($!)
"${proxy_on[@]}" "$GW" bare -listen 127.0.0.1:${PORT[bare]} -backend http://$BACKEND & pids+=($!)
prof=()
if [[ -n "${PROFILE:-}" ]]; then
	mkdir -p "$PROFILE"
	prof=(-cpuprofile "$PROFILE/gateway.cpu.pprof" -memprofile "$PROFILE/gateway.allocs.pprof")
fi
"${proxy_on[@]}" "$GW" gateway -listen 127.0.0.1:${PORT[gateway]} -admin 127.0.0.1:18093 -backend http://$BACKEND "${prof[@]}" & pids+=($!)

cat >"$tmp/nginx.conf" <<EOF
${NGINX_USER:+user $NGINX_USER;}
worker_processes ${NGINX_WORKERS:-auto};
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log warn;
daemon off;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $tmp/client_body;
  proxy_temp_path $tmp/proxy;
  fastcgi_temp_path $tmp/fastcgi;
  uwsgi_temp_path $tmp/uwsgi;
  scgi_temp_path $tmp/scgi;
  limit_conn_zone \$http_x_tenant zone=tenant:10m;
  upstream backend { server $BACKEND; keepalive 64; }
  server {
    listen 127.0.0.1:${PORT[nginx]};
    location / {
      limit_conn tenant 1024;
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
  }
}
EOF
"${proxy_on[@]}" $NGINX -e "$tmp/nginx-error.log" -c "$tmp/nginx.conf" -p "$tmp" & pids+=($!)

for t in bare gateway nginx; do
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/${PORT[$t]}") 2>/dev/null && break
		sleep 0.1
	done
	"${load_on[@]}" $WRK -t"$THREADS" -c"$CONNS" -d2s -H 'X-Tenant: bench' "http://127.0.0.1:${PORT[$t]}/" >/dev/null # warm up
done

mkdir -p "$(dirname "$OUT")"
{
	echo "# benchmarks/gateway-wrk.sh $ROUNDS $DURATION (wrk -t$THREADS -c$CONNS, $(date -u +%Y-%m-%dT%H:%MZ))"
	echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1-3 /proc/loadavg); proxies on CPUs ${PROXY_CPUS:-any}, wrk and backend on ${LOAD_CPUS:-any}; $($NGINX -v 2>&1); $($WRK -v 2>&1 | head -1)"
	for r in $(seq "$ROUNDS"); do
		for t in bare gateway nginx; do
			echo "== round $r $t"
			"${load_on[@]}" $WRK -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -H 'X-Tenant: bench' "http://127.0.0.1:${PORT[$t]}/"
		done
	done
} >"$OUT"

# The summary: median requests/s and p99 per server, and ratios to bare.
awk '
function ms(v) {
	if (v ~ /us$/) return substr(v, 1, length(v)-2) / 1000
	if (v ~ /ms$/) return substr(v, 1, length(v)-2) + 0
	if (v ~ /s$/) return substr(v, 1, length(v)-1) * 1000
	return v + 0
}
function median(arr, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
	return n % 2 ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}
/^== round/ { t = $4 }
/^Requests\/sec:/ { n[t]++; rps[t, n[t]] = $2 }
/^ +99%/ { p99[t, n[t] + 1] = ms($2) }
END {
	split("bare gateway nginx", order, " ")
	for (k = 1; k <= 3; k++) {
		t = order[k]
		for (i = 1; i <= n[t]; i++) { a[i] = rps[t, i]; b[i] = p99[t, i] }
		mr[t] = median(a, n[t]); mp[t] = median(b, n[t])
		all = ""
		for (i = 1; i <= n[t]; i++) all = all sprintf(" %.0f", rps[t, i])
		runs[t] = all
	}
	# Ratios to bare within each round (the same minute of the same
	# machine), then their median: steadier than the ratio of medians.
	for (k = 1; k <= 3; k++) {
		t = order[k]
		for (i = 1; i <= n[t]; i++) { a[i] = rps[t, i] / rps["bare", i]; b[i] = p99[t, i] / p99["bare", i] }
		rr[t] = median(a, n[t]); rp[t] = median(b, n[t])
	}
	printf "| server | req/s (median of %d rounds) | p99 (median) | req/s / bare (median of rounds) | p99 / bare (median of rounds) | req/s of each round |\n", n["bare"]
	print "|---|---|---|---|---|---|"
	for (k = 1; k <= 3; k++) {
		t = order[k]
		printf "| %s | %.0f | %.2f ms | %.2f | %.2f | %s |\n", t, mr[t], mp[t], rr[t], rp[t], runs[t]
	}
}' "$OUT"
