# Sourced by install-deps.sh and install-dev-deps.sh: installs Debian packages quietly.
#   apt_install TAG PACKAGE...
# Installs the packages that are not installed yet (nothing to do: no output at all), with
# one line saying what and where the log is; on failure prints the log's tail and exits 1.
# Services that packages would start (redis-server on port 6379) are kept from starting
# while we install: the tests start their own.
apt_install() {
  local tag=$1 p
  shift
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
    echo "$tag: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  local sudo="" log policy=/usr/sbin/policy-rc.d made_policy=0 status=0
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  log=$(mktemp "/tmp/$tag.XXXXXX.log")
  echo "$tag: installing ${missing[*]} (log: $log)"
  # Only if no policy is there already: it is not ours to replace.
  if [ ! -e "$policy" ] && [ "$(id -u)" -eq 0 ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
  fi
  { DEBIAN_FRONTEND=noninteractive $sudo apt-get update -q &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; } \
    >"$log" 2>&1 || status=$?
  ((made_policy)) && rm -f "$policy"
  if ((status)); then
    tail -20 "$log" >&2
    echo "$tag: apt-get failed" >&2
    exit 1
  fi
}
