#!/usr/bin/env bash
# serve_nginx.sh — the recipe of docs/SCALING.md: two `cmf serve` replicas
# behind Debian's nginx on loopback, the upstream chosen by a consistent
# hash of the client's X-Session-Id header (so a conversation keeps its
# replica and its prefix cache). 50 requests of 10 sessions through nginx:
# both replicas serve, each session sticks to one (X-Cmf-Instance names
# the replica); with one replica stopped, every request still succeeds on
# the other (passive health checks).
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "SKIP: nginx is not installed (Debian package nginx; .ci/run installs it)"; exit 77; }
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
T=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    [ -f "$T/nginx.pid" ] && kill -TERM "$(cat "$T/nginx.pid")" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
. "$SRC/tests/cli/lib/serve.sh"
serve_model bf16
declare -A PORTS
for r in a b; do
    "$BIN" serve "$T/shk.cmf" --port 0 --instance replica-$r --quiet >"$T/$r.log" 2>&1 &
    PIDS+=($!)
    eval "PID_$r=$!"
done
for r in a b; do
    for i in $(seq 1 300); do grep -q "cmf serve: ready" "$T/$r.log" && break; sleep 0.1; done
    PORTS[$r]=$(sed -n 's|.*listening on http://[^ ]*:\([0-9][0-9]*\)/.*|\1|p' "$T/$r.log")
    [ -n "${PORTS[$r]}" ] || { echo "FAIL: replica $r did not start: $(cat "$T/$r.log")"; exit 1; }
done
NPORT=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
sed -e "s|@DIR@|$T|g" -e "s|@PORT@|$NPORT|g" -e "s|@A@|127.0.0.1:${PORTS[a]}|" -e "s|@B@|127.0.0.1:${PORTS[b]}|" \
    "$SRC/docs/nginx-cmf.conf" >"$T/nginx.conf"
"$NGINX" -c "$T/nginx.conf" -p "$T" 2>"$T/nginx.err" || { echo "FAIL: nginx: $(cat "$T/nginx.err")"; exit 1; }
for i in $(seq 1 50); do [ -f "$T/nginx.pid" ] && break; sleep 0.1; done

cat >"$T/client.mjs" <<'JS'
const [url, phase] = process.argv.slice(2);
const seen = {};
let ok = 0, n = 0;
for (let i = 0; i < 50; i++) {
  const session = 'conversation-' + (i % 10);
  const r = await fetch(url + '/v1/chat/completions', { method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Session-Id': session },
    body: JSON.stringify({ model: 'shk', messages: [{ role: 'user', content: 'Good morrow ' + session }], max_tokens: 8, temperature: 0 }) });
  n++;
  const j = await r.json().catch(() => null);
  if (r.status === 200 && j && j.choices[0].message.content.length) ok++;
  (seen[session] = seen[session] || new Set()).add(r.headers.get('x-cmf-instance'));
}
const sticky = Object.values(seen).every((s) => s.size === 1);
const replicas = new Set(Object.values(seen).flatMap((s) => [...s]));
console.log(JSON.stringify({ phase, ok, n, sticky, replicas: [...replicas].sort() }));
JS
out=$(node "$T/client.mjs" "http://127.0.0.1:$NPORT" both) || fail "client: $out"
echo "through nginx: $out"
case $out in *'"ok":50,"n":50,"sticky":true,"replicas":["replica-a","replica-b"]'*) ;; *) fail "both replicas, each session on one: $out" ;; esac
# every replica saw requests (its own metrics)
for r in a b; do
    c=$(node -e "fetch('http://127.0.0.1:${PORTS[$r]}/metrics').then(r=>r.text()).then(t=>{let v=0;for(const l of t.split('\n'))if(l.startsWith('cmf:http_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"}'))v+=+l.split(' ').pop();console.log(v)})")
    [ "${c:-0}" -gt 0 ] || fail "replica $r served no chat request"
    echo "replica $r served $c"
done
# one replica gone: everything goes to the other
kill -TERM $PID_a
wait $PID_a || fail "replica a exit status $? after SIGTERM"
out=$(node "$T/client.mjs" "http://127.0.0.1:$NPORT" failover) || fail "client: $out"
echo "with replica a stopped: $out"
case $out in *'"ok":50,"n":50,"sticky":true,"replicas":["replica-b"]'*) ;; *) fail "failover to replica b: $out" ;; esac
kill -TERM $PID_b
wait $PID_b || fail "replica b exit status $? after SIGTERM"
[ $fails -eq 0 ] && echo "serve_nginx: all passed"
exit $((fails > 0))
