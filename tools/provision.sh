#!/usr/bin/env bash
# What `make book` and `make test` need from the system, installed here when we may, named when we may not.
#
#   tools/provision.sh book   # npm (the site's JavaScript comes from the npm registry)
#   tools/provision.sh test   # also Debian's chromium, chromium-driver and a CJK font (browser tests, figures)
#
# As root on Debian/Ubuntu (CI, containers) it installs what is missing with apt-get. Otherwise it
# stops at once, before any long work, with one line naming the command to run.
set -euo pipefail
need=()
command -v npm >/dev/null || need+=(npm)
python3 -c "import ensurepip" 2>/dev/null || need+=(python3-venv)
if [ "${1:-test}" = test ]; then
  [ -x /usr/bin/chromium ] || need+=(chromium)
  [ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
  fonts=$(fc-list 2>/dev/null || true)  # read whole: `fc-list | grep -q` can fail on SIGPIPE
  grep -qi "Noto Sans CJK" <<<"$fonts" || need+=(fonts-noto-cjk)
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "Installing ${need[*]} with apt-get (needed by make ${1:-test}) ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" fontconfig >/dev/null
else
  echo "make ${1:-test} needs system packages first: sudo apt-get install ${need[*]}" >&2
  exit 1
fi
