#!/usr/bin/env bash
# Make sure a `redis-server` binary is available (the shared-cache tests start a private one).
# Prints the binary's path on stdout and exits 0, or prints why not on stderr and exits 1.
#   1. already on PATH (or in /usr/sbin, /usr/local/bin): done;
#   2. as root with apt-get: `apt-get install redis-server` (after one `apt-get update`), then
#      stop and disable the system service it may start: the tests run their own server on a free
#      port in a temporary directory and need nothing else.
# Nothing is downloaded outside the system's package manager.
set -u
find_redis() {
  command -v redis-server 2>/dev/null && return 0
  for p in /usr/bin/redis-server /usr/sbin/redis-server /usr/local/bin/redis-server; do
    [ -x "$p" ] && { echo "$p"; return 0; }
  done
  return 1
}
find_redis && exit 0
if [ "$(id -u)" != "0" ]; then
  echo "redis-server is not installed and this is not root (install it: apt-get install redis-server)" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "redis-server is not installed and there is no apt-get to install it with" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { apt-get install -y -q --no-install-recommends redis-server >"$log" 2>&1 ||
       { apt-get update -q >>"$log" 2>&1 && apt-get install -y -q --no-install-recommends redis-server >>"$log" 2>&1; }; }; then
  echo "apt-get install redis-server failed: $(tail -n 3 "$log" | tr '\n' ' ')" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
# the package may start a system-wide server on port 6379: not ours to keep running
if command -v service >/dev/null 2>&1; then service redis-server stop >/dev/null 2>&1 || true; fi
find_redis && exit 0
echo "apt-get installed redis-server but no redis-server binary was found" >&2
exit 1
