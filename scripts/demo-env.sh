# The demo's settings, shared by scripts/serve and the test that serves the demo as it does.
# $1: the address it serves (host:port). DEBUG stays off, so a missing page or a server error
# shows the dashboard's own pages (DEBUG's 404 lists every URL pattern); the demo's own
# compromises are spelled out instead: cookies sent over plain HTTP, the loopback names as
# hosts, and read access open (the key is the one scripts/serve keeps in var/secret_key).
demo_host="${1%:*}"
export DEBUG="${DEBUG:-0}"
export EVALDASH_SECURE_COOKIES="${EVALDASH_SECURE_COOKIES:-0}"
export ALLOWED_HOSTS="${ALLOWED_HOSTS:-localhost,127.0.0.1,[::1],$demo_host}"
export EVALDASH_PUBLIC_READ="${EVALDASH_PUBLIC_READ:-1}"
