#!/usr/bin/env bash
# Install the Debian packages the tests and the demo need on this machine (the controller), only those missing.
# Fast and safe to rerun: with everything present it runs no apt command at all.
set -euo pipefail
packages=(
  qemu-system-x86 qemu-utils ovmf       # the VMs (TCG) and, for the secureboot scenario, UEFI firmware
  debootstrap e2fsprogs cpio            # building the guest image (mkfs.ext4 -d)
  openssh-client rsync xz-utils zstd    # reaching the guest; compressed modules
  python3-venv make git                 # the test environment
  chromium fonts-dejavu-core            # the screenshot test of the HTML fleet report
  dpkg-dev debhelper fakeroot dkms      # upstream-style debs of the source tree (molecule/lifecycle/upstream.yml)
  softhsm2 kmod openssl linux-kbuild-6.1 # a PKCS#11 token, modinfo, openssl and the kernel's sign-file (module signing)
)
# A real release's packages/build-deb-packages.sh also runs debuild.
if [ -n "${GDRCOPY_SOURCE_TARBALL:-}" ]; then
  packages+=(devscripts)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f '${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
