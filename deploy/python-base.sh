#!/usr/bin/env bash
# Make a Python base image for deploy/Dockerfile from Debian's packages alone, for hosts that
# reach no container registry: writes a root filesystem tarball for `docker import`.
#
#   deploy/python-base.sh OUTPUT.tar [SUITE [MIRROR]]      (as root; needs debootstrap)
#   docker import OUTPUT.tar basra-python-base:trixie
#   docker build -f deploy/Dockerfile --build-arg PYTHON_IMAGE=basra-python-base:trixie ...
#
# The result is laid out as the official python images are where the Dockerfile relies on it:
# `python` on the PATH, pip, setuptools and wheel installed by pip under /usr/local (so that
# `pip uninstall` can remove them), no EXTERNALLY-MANAGED marker, and the useradd/groupadd of
# Debian's passwd package. The interpreter is the suite's python3 (trixie: 3.13). The host's CA
# bundle replaces Debian's, so that pip inside a build trusts what this host trusts (a
# company proxy's certificate, say). pip, setuptools and wheel come from PyPI (or the index
# this host's pip is configured with) at the versions and hashes of deploy/python-base.lock,
# downloaded by this host's python3.
set -euo pipefail
out=${1:?usage: deploy/python-base.sh OUTPUT.tar [SUITE [MIRROR]]}
suite=${2:-trixie}
mirror=${3:-http://deb.debian.org/debian}
python=${PYTHON:-python3}

work=$(mktemp -d "${TMPDIR:-/tmp}/python-base.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root

debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,passwd \
  "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; exit 1; }

"$python" -m pip download --quiet --only-binary=:all: --dest "$work/wheels" \
  --require-hashes -r "$(dirname "$0")/python-base.lock"
mkdir -p "$root/tmp/wheels"
cp "$work"/wheels/*.whl "$root/tmp/wheels/"
rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
pip_wheel=$(cd "$root/tmp/wheels" && ls pip-*.whl)
# pip runs from its own wheel; as root outside a venv, Debian's python installs to /usr/local.
chroot "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin \
  python3 "/tmp/wheels/$pip_wheel/pip" install --quiet --no-index --find-links /tmp/wheels \
  --root-user-action=ignore --disable-pip-version-check pip setuptools wheel
ln -sf /usr/bin/python3 "$root/usr/local/bin/python"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
rm -rf "$root/tmp/wheels" "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
  "$root"/var/log/*.log "$root"/var/cache/ldconfig/aux-cache

# Devices, /proc and /sys are the engine's to provide at run time.
# Written aside and renamed, so that a reader never sees half a tarball.
partial=$(mktemp "$out.XXXXXX")
tar --numeric-owner --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* \
  -C "$root" -cf "$partial" .
chmod 644 "$partial"
mv "$partial" "$out"
