# Sourced by bench/h2.sh and bench/h2_profile.sh: a private nginx speaking h2 (TLS, the peers'
# certificate for api.example.test) on $port, and haproxy 2.6 terminating TLS with h2 on both
# sides in front of it on $hport (empty without haproxy). Needs $work, $PEERS and free_port; the
# caller's exit trap ends them by their pid files ($work/nginx.pid, $work/haproxy.pid).
port=$(free_port)
cat > "$work/nginx.conf" <<NG
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx.err;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port ssl http2;
    server_name api.example.test;
    ssl_certificate $PEERS/leaf.pem;
    ssl_certificate_key $PEERS/leaf.key;
    root $PEERS/www;
  }
}
NG
nginx -c "$work/nginx.conf" -e "$work/nginx.err" || die "nginx did not start"

hport=
if command -v haproxy > /dev/null; then
  hport=$(free_port)
  cat "$PEERS/leaf.pem" "$PEERS/leaf.key" > "$work/haproxy-leaf.pem"
  cat > "$work/haproxy.cfg" <<HA
global
    maxconn 4096
    nbthread 2
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend fe
    bind 127.0.0.1:$hport ssl crt $work/haproxy-leaf.pem alpn h2,http/1.1
    default_backend be
backend be
    server nginx 127.0.0.1:$port ssl verify required ca-file $PEERS/upstream-ca.pem sni str(api.example.test) alpn h2
HA
  haproxy -D -f "$work/haproxy.cfg" -p "$work/haproxy.pid" || hport=
fi
