# Shared by scripts/serve and scripts/test: find Python 3.12+, make .venv, install requirements.
set -euo pipefail
cd "$(dirname "$0")/.."
pick_python() {
  for candidate in "${PYTHON:-}" python3 python3.13 python3.12 python3.14; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || continue
    if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "evaldash needs Python 3.12 or newer; set PYTHON=/path/to/python3.12+" >&2
  return 1
}
ensure_venv() {  # $1: requirements file
  local py
  py=$(pick_python)
  if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)'; then
    rm -rf .venv
    "$py" -m venv .venv
  fi
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$1"
}
ensure_secret_key() {  # a random key kept in var/ (ignored by git) for the commands run later
  local file="${EVALDASH_SECRET_KEY_FILE:-var/secret_key}"
  [ -s "$file" ] && return 0
  mkdir -p "$(dirname "$file")"
  (umask 077 && .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(50))' >"$file")
}
