#!/usr/bin/env bash
# Build the Debian root file system and disk image that the molecule scenarios boot under QEMU.
#
#   build-image.sh OUTDIR
#
# OUTDIR receives: disk.img (raw ext4, the VM's root), boot/vmlinuz-<k> + boot/initrd.img-<k> for every
# installed kernel, id_ed25519{,.pub} (the key root logs in with), ssh_host_*.pub (to pin host keys),
# manifest.json and build.log. Everything comes from Debian's archive through debootstrap's and apt's
# default mirror; nothing is downloaded from anywhere else. Test-only: the roles never use this.
#
# Inputs (environment): SUITE (bookworm), IMAGE_SIZE (8G), EXTRA_PACKAGES (""), STANDINS_DIR (tests/standins, to
# build the test-only stand-in modules into the image; unset: none).
set -euo pipefail

out=${1:?usage: build-image.sh OUTDIR}
suite=${SUITE:-bookworm}
size=${IMAGE_SIZE:-8G}
root="$out/root"

# What every scenario needs in the guest. Kernel packages are added below (two ABIs).
packages=(
  systemd-sysv udev dbus kmod openssh-server sudo python3 python3-apt
  build-essential linux-headers-amd64 linux-image-amd64 initramfs-tools
  iproute2 procps psmisc xz-utils zstd openssl keyutils ca-certificates file gnupg
)
# shellcheck disable=SC2206
packages+=(${EXTRA_PACKAGES:-})

log() { printf '[build-image %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

mounted=()
cleanup() {
  local m
  for ((i=${#mounted[@]}-1; i>=0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT

in_root() { LC_ALL=C DEBIAN_FRONTEND=noninteractive chroot "$root" "$@"; }
# Kernel postinst hooks skip the initrd (INITRD=No): it is made once for every kernel at the end.
apt_install() {
  LC_ALL=C DEBIAN_FRONTEND=noninteractive INITRD=No chroot "$root" apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@" >>"$out/build.log" 2>&1 \
    || { tail -30 "$out/build.log" >&2; exit 1; }
}

rm -rf "$root"
mkdir -p "$out/boot"

log "debootstrap $suite (minbase, main contrib non-free)"
debootstrap --variant=minbase --components=main,contrib,non-free "$suite" "$root" >>"$out/build.log" 2>&1 \
  || { tail -30 "$out/build.log" >&2; exit 1; }

for m in proc sys dev dev/pts; do
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sysfs "$root/sys" ;;
    dev) mount --bind /dev "$root/dev" ;;
    dev/pts) mount -t devpts devpts "$root/dev/pts" ;;
  esac
  mounted+=("$root/$m")
done
# No service starts inside the chroot; dpkg skips fsync; initramfs is made once at the end, not per package.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/zz-build-image"
mkdir -p "$root/etc/initramfs-tools/conf.d"
printf 'update_initramfs=no\n' >"$root/etc/initramfs-tools/update-initramfs.conf"
# A small initrd with just what the VM's root needs: under TCG a MODULES=most initrd (30 MB) costs ~15 s a boot.
printf 'MODULES=list\n' >"$root/etc/initramfs-tools/conf.d/gdrcopy-test-vm.conf"
printf '%s\n' virtio_pci virtio_blk ext4 crc32c_generic >"$root/etc/initramfs-tools/modules"

log "apt-get install ${#packages[@]} packages"
in_root apt-get update -qq >>"$out/build.log" 2>&1
apt_install "${packages[@]}"

# A second kernel ABI of the same series (kernel-upgrade tests): the newest linux-image-<abi>-amd64 in the
# archive other than the one linux-image-amd64 pulls in, of the same series and flavour, that also has its headers
# there. The ABI names differ by release (bookworm 6.1.0-<n>-amd64, trixie 6.12.<n>+deb13-amd64): kernel_abi.py.
current=$(in_root dpkg-query -W -f '${Depends}' linux-image-amd64 | grep -o 'linux-image-[^ ,]*-amd64' | head -1)
current=${current#linux-image-}
other=$(in_root apt-cache pkgnames linux-headers- | python3 "${KERNEL_ABI:?}" "$current" || true)
[ -n "$other" ] || { log "no second ABI of $current's series with headers in the archive"; exit 1; }
log "kernels: $current (linux-image-amd64) and $other"
apt_install "linux-image-$other" "linux-headers-$other"

# NVIDIA kernel module source from non-free, unpacked without building nvidia.ko (no dkms run):
# the stand-in modules are built against its nv-p2p.h, and the roles look for it as on a GPU host.
log "unpack nvidia-kernel-dkms source"
in_root sh -c 'cd /tmp && apt-get download -qq nvidia-kernel-dkms && dpkg-deb -x nvidia-kernel-dkms_*.deb / && rm -f nvidia-kernel-dkms_*.deb'
nvsrc=$(cd "$root/usr/src" && ls -d nvidia-current-[0-9]* | head -1)
nvver=${nvsrc#nvidia-current-}

# The test-only stand-ins for nvidia and nvidia-peermem (and the legacy nv_peer_mem), built here at native speed
# for every kernel and laid out exactly as tests/harness/standins.yml leaves them, so that the scenarios' prepare
# finds them built and skips the compiles (minutes under TCG). STANDINS_DIR: tests/standins (vm.py sets it).
if [ -n "${STANDINS_DIR:-}" ]; then
  log "build the test-only stand-ins for every kernel"
  st=/usr/local/src/gdrcopy-test-standins
  mkdir -p "$root$st/src"
  cp -a "$STANDINS_DIR"/. "$root$st/src/"
  built=0
  for d in "$root"/lib/modules/*/; do
    k=$(basename "$d")
    # build is an absolute link (/usr/src/linux-headers-<k>): test it inside the root, not on the build host.
    in_root test -e "/lib/modules/$k/build/Makefile" || continue
    cp -a "$root$st/src" "$root$st/$k"
    in_root make -C "$st/$k" -j"$(nproc)" KVER="$k" NVIDIA_SRC_DIR="/usr/src/$nvsrc/nvidia" >>"$out/build.log" 2>&1 \
      || { tail -30 "$out/build.log" >&2; exit 1; }
    mkdir -p "$root/lib/modules/$k/extra/gdrcopy-test-standins"
    install -m 0644 "$root$st/$k/nvidia.ko" "$root$st/$k/nvidia-peermem.ko" "$root/lib/modules/$k/extra/gdrcopy-test-standins/"
    in_root depmod "$k"
    built=$((built + 1))
  done
  [ "$built" -gt 0 ] || { echo "no kernel in the image has headers: the stand-ins were not built" >&2; exit 1; }
  log "stand-ins built for $built kernel(s)"
fi

# The Secure Boot chain for the secureboot scenario (vm.py --firmware secureboot puts these on the ESP): Debian's
# signed shim, MokManager and grub, as files only (their packages' scripts would run grub-install).
log "extract Debian's signed shim, MokManager and grub"
in_root sh -c 'cd /tmp && apt-get download -qq shim-signed shim-helpers-amd64-signed grub-efi-amd64-signed \
  && for d in shim-signed_*.deb shim-helpers-amd64-signed_*.deb grub-efi-amd64-signed_*.deb; do dpkg-deb -x "$d" /tmp/efi; done \
  && rm -f ./*.deb'
mkdir -p "$out/efi"
cp "$root/tmp/efi/usr/lib/shim/shimx64.efi.signed" "$root/tmp/efi/usr/lib/shim/mmx64.efi.signed" \
  "$root/tmp/efi/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed" "$out/efi/"
rm -rf "$root/tmp/efi"

log "update-initramfs for every kernel"
sed -i 's/^update_initramfs=no/update_initramfs=yes/' "$root/etc/initramfs-tools/update-initramfs.conf"
in_root update-initramfs -c -k all >>"$out/build.log" 2>&1
rm -f "$root/etc/dpkg/dpkg.cfg.d/zz-build-image"

log "configure the guest"
echo gdrcopy-vm >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 gdrcopy-vm\n' >"$root/etc/hosts"
printf '/dev/vda / ext4 defaults,errors=remount-ro 0 1\n' >"$root/etc/fstab"
printf 'nameserver 10.0.2.3\n' >"$root/etc/resolv.conf"
mkdir -p "$root/etc/systemd/network" "$root/var/log/journal"
printf '[Match]\nName=e*\n\n[Network]\nDHCP=yes\n' >"$root/etc/systemd/network/10-dhcp.network"
in_root systemctl enable systemd-networkd ssh >>"$out/build.log" 2>&1
# Things a test VM under TCG does not need at boot.
in_root systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service \
  systemd-networkd-wait-online.service >>"$out/build.log" 2>&1 || true
in_root passwd -l root >/dev/null
rm -f "$out"/id_ed25519 "$out"/id_ed25519.pub
ssh-keygen -q -t ed25519 -N '' -C gdrcopy-vm-test -f "$out/id_ed25519"
install -d -m 0700 "$root/root/.ssh"
install -m 0600 "$out/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
cp "$root"/etc/ssh/ssh_host_*_key.pub "$out/"
rm -f "$root/usr/sbin/policy-rc.d"
in_root apt-get clean

cleanup; mounted=()

kernels=()
for v in "$root"/boot/vmlinuz-*; do
  k=${v##*/vmlinuz-}
  kernels+=("$k")
  cp "$v" "$out/boot/"
  cp "$root/boot/initrd.img-$k" "$out/boot/"
  [ -d "$root/usr/src/linux-headers-$k" ] || { log "headers for $k missing"; exit 1; }
done

log "mkfs.ext4 $size"
rm -f "$out/disk.img"
mkfs.ext4 -q -F -L gdrcopy-vm -d "$root" "$out/disk.img" "$size"

python3 - "$out/manifest.json" "$suite" "$current" "$nvver" "${kernels[@]}" <<'PY'
import json, sys, datetime
path, suite, default, nvver, *kernels = sys.argv[1:]
json.dump({"suite": suite, "default_kernel": default, "kernels": sorted(kernels),
           "nvidia_source_version": nvver, "nvidia_source_dir": f"/usr/src/nvidia-current-{nvver}",
           "built": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
          open(path, "w"), indent=2)
PY
rm -rf "$root"
log "done: $(du -sh --apparent-size "$out/disk.img" | cut -f1) apparent, $(du -sh "$out/disk.img" | cut -f1) used"
