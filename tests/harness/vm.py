#!/usr/bin/env python3
"""Throwaway Debian VMs on real kernels under QEMU, for the molecule scenarios and the demo.

Standard library only, so molecule's create/destroy playbooks and `make demo` call it with any Python 3.

    vm.py image                      build the cached disk image unless an identical one exists; print its dir
    vm.py up     --state DIR [--kernel K] [--firmware direct|secureboot]
                                     boot a VM on a copy-on-write overlay of the image; print JSON
    vm.py reboot --state DIR [--kernel K] [--mok none|enroll|delete|ignore] [--add-mok CERT.der]
                                     shut the VM down cleanly and boot it again (on kernel K)
    vm.py down   --state DIR                stop the VM this state dir started and delete its overlay
    vm.py root   --state DIR                the image's root tree in DIR/root, with /proc, /sys, /dev and the
                                     controller's resolv.conf mounted in it: a chroot, as an image build sees it
    vm.py unroot --state DIR [--remove]     unmount what `root` mounted (and delete the tree)
    vm.py up     --state DIR --root-tree TREE
                                     boot a disk made from TREE (a converged `root`) instead of the image's disk
    vm.py ssh    --state DIR -- CMD...      run a command in the VM as root
    vm.py info   --state DIR                print the instance JSON

K is a kernel release installed in the guest, `default` (what linux-image-amd64 points at) or `other`
(the image's second kernel). The image cache lives in .cache/vm of the repository unless
GDRCOPY_VM_CACHE says otherwise; images are keyed by a hash of their inputs. GDRCOPY_VM_ACCEL picks
the accelerator: tcg, kvm, or auto (default: KVM only when a short probe boot reaches init, else TCG).

Firmware `direct` (default) starts the kernel with QEMU's -kernel. `secureboot` boots like a Secure Boot server:
OVMF with Microsoft's keys enrolled and Secure Boot on (its variables kept per VM in DIR/efivars.fd, so MOK
state survives reboots), an ESP holding Debian's signed shim, MokManager and grub, and Debian's signed kernel
from the VM's disk. `reboot --mok enroll` (or `delete`, for a deletion request) answers MokManager over the serial
console (pexpect) with the password in GDRCOPY_VM_MOK_PASSWORD; `--mok ignore` waits until MokManager has shown its prompt and lets it time out, as
an unattended server does; `none` expects no MokManager.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BUILD_SCRIPT = HERE / "build-image.sh"
KERNEL_ABI = HERE / "kernel_abi.py"  # the build's pick of the second kernel
STANDINS = HERE.parent / "standins"  # test-only stand-in modules, built into the image (build-image.sh)
IMAGE_INPUTS = {"SUITE": "bookworm", "IMAGE_SIZE": "8G", "EXTRA_PACKAGES": ""}
SUITES = ("bookworm", "trixie")  # Debian 12 and 13: the releases the scenarios boot
BOOT_TIMEOUT = int(os.environ.get("GDRCOPY_VM_BOOT_TIMEOUT", "420"))
OVMF = Path("/usr/share/OVMF")
OVMF_CODE = OVMF / "OVMF_CODE_4M.secboot.fd"  # Secure Boot capable, SMM required
OVMF_VARS = OVMF / "OVMF_VARS_4M.ms.fd"       # Microsoft's KEK/db enrolled, Secure Boot on
# What the image build extracted from Debian's shim-signed, shim-helpers-amd64-signed and grub-efi-amd64-signed.
SHIM_LOCK_GUID = "605dab50-e046-4300-abb6-3dd810dd8b23"  # the vendor GUID of MokList
ESP_FILES = {"BOOTX64.EFI": "shimx64.efi.signed", "mmx64.efi": "mmx64.efi.signed", "grubx64.efi": "grubx64.efi.signed"}
KVM_PROBE_MARKER = b"Run /init as init process"
# Under TCG every module udev loads for the emulated chipset costs seconds (VGA, AHCI, CD-ROM, parport,
# watchdog, wireless regulatory, nested KVM...). The guest needs none of them: its root is virtio.
# -nodefaults drops the VGA card, CD-ROM, floppy and parallel port; this list keeps the rest from loading.
BOOT_QUIET = "module_blacklist=" + ",".join([
    "ahci", "libahci", "bochs", "bochs_drm", "cfg80211", "i2c_i801", "iTCO_wdt", "iTCO_vendor_support",
    "kvm", "kvm_amd", "kvm_intel", "lpc_ich", "parport_pc", "ppdev", "pcspkr", "sr_mod", "serio_raw",
    "powernow_k8", "aesni_intel", "ghash_clmulni_intel", "crc32_pclmul", "joydev", "evdev",
])
# What the guest kernel spends that TCG makes dear and a test VM does not need: the CPU vulnerability mitigations (page
# table isolation flushes the TLB at every system call, which under TCG drops the translated code's TLB too) and
# zeroing every page it allocates. Measured on the trixie VM (2026-12-07, 2 vCPUs): a gdrdrv-sized compile 75 -> 55 s,
# site.yml with every task 62 -> 42 s, 300 process starts 15 -> 8 s. The roles' work (signing, lockdown, module
# loading) does not depend on either.
TCG_SPEED = "mitigations=off init_on_alloc=0"
KERNEL_ARGS = f"console=ttyS0 root=/dev/vda rw net.ifnames=0 systemd.show_status=false {TCG_SPEED} {BOOT_QUIET}"


def log(msg: str) -> None:
    print(f"[vm {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    return Path(os.environ.get("GDRCOPY_VM_CACHE", REPO / ".cache" / "vm")).resolve()


def image_inputs(suite: str = "") -> dict[str, str]:
    """The image's build inputs: GDRCOPY_VM_<NAME> or the default, the suite a platform names (molecule.yml's
    `suite`, vm.py up --suite) over both."""
    inputs = {k: os.environ.get(f"GDRCOPY_VM_{k}", v) for k, v in IMAGE_INPUTS.items()}
    if suite:
        inputs["SUITE"] = suite
    if inputs["SUITE"] not in SUITES:
        raise SystemExit(f"the VM image's suite must be one of {', '.join(SUITES)} (got {inputs['SUITE']!r})")
    return inputs


def image_key(inputs: dict[str, str]) -> str:
    """Hash of everything that decides the image's content: the build script, its inputs and the stand-ins'
    sources it builds into the image."""
    h = hashlib.sha256(BUILD_SCRIPT.read_bytes() + KERNEL_ABI.read_bytes())
    h.update(json.dumps(inputs, sort_keys=True).encode())
    for path in sorted(p for p in STANDINS.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(STANDINS)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def ensure_image(suite: str = "") -> Path:
    """Return the image dir, building it first when no complete image with the same key exists."""
    inputs = image_inputs(suite)
    images = cache_dir() / "images"
    images.mkdir(parents=True, exist_ok=True)
    out = images / image_key(inputs)
    with open(images / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / "ready").exists():
            log(f"image {out.name} reused (built {manifest(out)['built']})")
            return out
        if os.geteuid() != 0:
            sys.exit("building the VM image needs root (debootstrap, chroot, mkfs.ext4 -d)")
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        log(f"building image {out.name} (debootstrap {inputs['SUITE']}; takes a few minutes)")
        start = time.monotonic()
        # A make above us (make test) must not reach the image's own makes: `make -n` or a jobserver in MAKEFLAGS
        # would turn the stand-ins' kbuild into a dry run or a wait on file descriptors the chroot lacks.
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
        script = out / BUILD_SCRIPT.name  # run copies: editing the originals mid-build must not derail the build
        shutil.copyfile(BUILD_SCRIPT, script)
        shutil.copyfile(KERNEL_ABI, out / KERNEL_ABI.name)
        env.update(inputs, STANDINS_DIR=str(STANDINS), KERNEL_ABI=str(out / KERNEL_ABI.name))
        # stdout is the JSON callers parse (`vm.py up`): the build talks on stderr only.
        subprocess.run(["bash", str(script), str(out)], env=env, check=True, stdout=sys.stderr)
        (out / "ready").write_text(f"{time.monotonic() - start:.0f}\n")
        log(f"image {out.name} built in {time.monotonic() - start:.0f}s")
        return out


def manifest(image: Path) -> dict:
    return json.loads((image / "manifest.json").read_text())


# What a chroot needs of the build host, mounted as Packer's chroot builder and `wwctl container exec` do.
CHROOT_MOUNTS = [("proc", ["-t", "proc", "proc"]), ("sys", ["-t", "sysfs", "sysfs"]), ("dev", ["--bind", "/dev"]),
                 ("dev/pts", ["-t", "devpts", "devpts"]), ("etc/resolv.conf", ["--bind", "/etc/resolv.conf"])]


def mounts_under(tree: Path, mountinfo: str | None = None) -> list[str]:
    """Mount points at or below tree, deepest first (from /proc/self/mountinfo, or that file's text)."""
    prefix = str(tree.resolve())
    points = []
    text = Path("/proc/self/mountinfo").read_text() if mountinfo is None else mountinfo
    for line in text.splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return sorted(points, key=len, reverse=True)


def extract_root(image: Path, tree: Path) -> None:
    """Copy the image's root file system into tree without mounting it (debugfs rdump), then put back the set-uid
    and set-gid bits, which rdump drops (it changes the owner after the mode)."""
    disk = image / "disk.img"
    tmp = tree.with_name(tree.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    start = time.monotonic()
    subprocess.run(["debugfs", "-R", f"rdump / {tmp}", str(disk)], check=True, stdout=sys.stderr,
                   stderr=subprocess.DEVNULL)
    executables = [str(p.relative_to(tmp)) for p in tmp.rglob("*")
                   if p.is_file() and not p.is_symlink() and p.stat().st_mode & 0o111]
    script = "".join(f'stat "/{rel}"\n' for rel in executables)
    out = subprocess.run(["debugfs", "-f", "-", str(disk)], input=script, capture_output=True, text=True,
                         check=True).stdout
    restored = 0
    for rel, mode in zip(executables, [line.split("Mode:")[1].split()[0] for line in out.splitlines()
                                       if "Mode:" in line]):
        if int(mode, 8) & 0o6000:
            os.chmod(tmp / rel, int(mode, 8) & 0o7777)
            restored += 1
    os.replace(tmp, tree)
    log(f"image root extracted to {tree} in {time.monotonic() - start:.0f}s ({restored} set-id files)")


def mount_root(tree: Path) -> None:
    mounted = mounts_under(tree)
    for rel, args in CHROOT_MOUNTS:
        point = tree / rel
        if str(point) not in mounted:
            subprocess.run(["mount", *args, str(point)], check=True)


def unmount_root(tree: Path) -> None:
    for point in mounts_under(tree):
        if subprocess.run(["umount", point], stderr=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["umount", "-l", point], check=True)
    left = mounts_under(tree)
    if left:
        sys.exit(f"still mounted under {tree}: {left}")


def make_disk(tree: Path, disk: Path, size: str) -> None:
    """An ext4 root disk (label gdrcopy-vm, as the image's) holding tree: no mount, as the image build does."""
    if mounts_under(tree):
        sys.exit(f"{tree} still has mounts in it ({mounts_under(tree)}): run `vm.py unroot` first")
    start = time.monotonic()
    disk.unlink(missing_ok=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "gdrcopy-vm", "-d", str(tree), str(disk), size], check=True,
                   stdout=sys.stderr)
    log(f"disk {disk.name} made from {tree} in {time.monotonic() - start:.0f}s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def qemu_alive(pid: int, state: Path) -> bool:
    """True when pid is a QEMU started for this state dir (never signal a stranger)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"qemu-system" in cmdline and str(state).encode() in cmdline


def kvm_works(image: Path, kernel: str) -> bool:
    """Boot the image's kernel under KVM for a few seconds and see whether it reaches init.

    KVM guests hang after decompression on some hosts (docs/VM-TESTING.md); the answer is cached per
    host kernel and QEMU binary.
    """
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    qemu = shutil.which("qemu-system-x86_64") or ""
    probe_key = hashlib.sha256(f"{os.uname().release} {qemu} {os.stat(qemu).st_mtime}".encode()).hexdigest()[:12]
    cached = cache_dir() / f"kvm-probe-{probe_key}"
    if cached.exists():
        return cached.read_text().strip() == "yes"
    log("probing KVM with a 20 s boot")
    cmd = [qemu, "-accel", "kvm", "-cpu", "host", "-m", "512", "-display", "none", "-no-reboot",
           "-serial", "stdio", "-monitor", "none", "-kernel", str(image / "boot" / f"vmlinuz-{kernel}"),
           "-initrd", str(image / "boot" / f"initrd.img-{kernel}"), "-append", "console=ttyS0 panic=-1"]
    # Its own stdin: `-serial stdio` makes QEMU set O_NONBLOCK (and raw mode, on a terminal) on fd 0 and undo it only
    # at a clean exit, which the kill below is not; on the caller's stdin that broke the next ansible-playbook.
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    os.set_blocking(proc.stdout.fileno(), False)
    seen, deadline = b"", time.monotonic() + 20
    while time.monotonic() < deadline and proc.poll() is None and KVM_PROBE_MARKER not in seen:
        time.sleep(0.2)
        seen += proc.stdout.read() or b""
    proc.kill()
    proc.wait()
    ok = KVM_PROBE_MARKER in seen
    cached.write_text("yes\n" if ok else "no\n")
    log(f"KVM {'works' if ok else 'does not reach init here; using TCG'}")
    return ok


def accel_args(image: Path, kernel: str) -> list[str]:
    choice = os.environ.get("GDRCOPY_VM_ACCEL", "auto")
    if choice == "kvm" or (choice == "auto" and kvm_works(image, kernel)):
        return ["-accel", "kvm", "-cpu", "host"]
    # Nehalem (x86-64-v2, no AVX): under TCG the guest's AVX code paths (glibc's string functions) are emulated
    # op by op; without them site.yml with every task ran 7 % faster (max: 46 s, Nehalem: 43 s).
    return ["-accel", "tcg,thread=multi", "-cpu", "Nehalem"]


class VM:
    def __init__(self, state: Path):
        self.state = state.resolve()
        self.info_file = self.state / "instance.json"

    # -- state ------------------------------------------------------------------------------------
    @property
    def info(self) -> dict:
        return json.loads(self.info_file.read_text())

    def save(self, info: dict) -> None:
        self.info_file.write_text(json.dumps(info, indent=2) + "\n")

    def pid(self) -> int | None:
        try:
            pid = int((self.state / "qemu.pid").read_text())
        except (OSError, ValueError):
            return None
        return pid if qemu_alive(pid, self.state) else None

    # -- ssh --------------------------------------------------------------------------------------
    def ssh_argv(self, info: dict | None = None) -> list[str]:
        info = info or self.info
        return ["ssh", "-q", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "StrictHostKeyChecking=yes",
                "-o", f"UserKnownHostsFile={info['known_hosts']}", "-o", "IdentitiesOnly=yes",
                "-i", info["identity_file"], "-p", str(info["port"]), f"{info['user']}@{info['address']}"]

    def ssh(self, *cmd: str, check: bool = True, capture: bool = False, timeout: int = 600, stdin=subprocess.DEVNULL):
        # Not the caller's stdin unless asked (`vm.py ssh`): ssh sets O_NONBLOCK on a stdin that is no terminal and a
        # timeout's kill leaves it so, as the KVM probe's did.
        return subprocess.run(self.ssh_argv() + ["--", *cmd], check=check, timeout=timeout, stdin=stdin,
                              stdout=subprocess.PIPE if capture else None, text=True)

    def fetch(self, remote: str, local: Path) -> None:
        with open(local, "wb") as f:
            subprocess.run(self.ssh_argv() + ["--", "cat", remote], check=True, stdin=subprocess.DEVNULL, stdout=f,
                           timeout=300)

    # -- lifecycle --------------------------------------------------------------------------------
    def molecule_instance(self) -> dict:
        """The entry molecule's delegated driver expects in its instance config."""
        i = self.info
        return {k: i[k] for k in ("instance", "address", "user", "port", "identity_file")}

    def up(self, kernel: str, memory: int, cpus: int, firmware: str = "direct", root_tree: Path | None = None,
           suite: str = "") -> dict:
        if self.pid():
            log(f"already running (pid {self.pid()})")
            return self.info
        image = ensure_image(suite)
        man = manifest(image)
        self.state.mkdir(parents=True, exist_ok=True)
        disk = image / "disk.img"
        if root_tree:
            disk = self.state / "disk.img"
            make_disk(root_tree, disk, image_inputs(suite)["IMAGE_SIZE"])
        overlay = self.state / "overlay.qcow2"
        if not overlay.exists():
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
                            str(disk), str(overlay)], check=True, stdin=subprocess.DEVNULL)
        port = free_port()
        known_hosts = self.state / "known_hosts"
        known_hosts.write_text("".join(f"[127.0.0.1]:{port} {p.read_text().split()[0]} {p.read_text().split()[1]}\n"
                                       for p in sorted(image.glob("ssh_host_*_key.pub"))))
        key = self.state / "id_ed25519"
        shutil.copyfile(image / "id_ed25519", key)
        key.chmod(0o600)
        info = {"instance": self.state.name, "address": "127.0.0.1", "user": "root", "port": port,
                "identity_file": str(key), "known_hosts": str(known_hosts), "image": str(image),
                "kernels": man["kernels"], "default_kernel": man["default_kernel"],
                "nvidia_source_dir": man["nvidia_source_dir"], "memory": memory, "cpus": cpus, "boots": 0,
                "firmware": firmware}
        if firmware == "secureboot":
            self.make_esp(image)
            if not (self.state / "efivars.fd").exists():
                shutil.copyfile(OVMF_VARS, self.state / "efivars.fd")
        boot = self.state / "boot"
        boot.mkdir(exist_ok=True)
        kernel = self.resolve_kernel(kernel, info)
        for name in (f"vmlinuz-{kernel}", f"initrd.img-{kernel}"):
            shutil.copyfile(image / "boot" / name, boot / name)
        self.save(info)
        self.start(kernel)
        return self.info

    def resolve_kernel(self, kernel: str, info: dict) -> str:
        if kernel == "default":
            return info["default_kernel"]
        if kernel == "other":
            return next(k for k in info["kernels"] if k != info["default_kernel"])
        return kernel

    def make_esp(self, image: Path) -> None:
        """The EFI system partition (a directory QEMU shows as a read-only FAT disk): shim as the removable-media
        loader, MokManager and grub beside it. No fbx64.efi: the fallback loader would reset the boot entries."""
        esp = self.state / "esp" / "EFI" / "BOOT"
        esp.mkdir(parents=True, exist_ok=True)
        for name, source in ESP_FILES.items():
            shutil.copyfile(image / "efi" / source, esp / name)

    def write_grub_cfg(self, kernel: str) -> None:
        """grub.cfg beside grubx64.efi: boot `kernel` from the VM's disk (ext4, label gdrcopy-vm) at once."""
        cfg = (f"set timeout=0\nsearch --no-floppy --label --set=root gdrcopy-vm\n"
               f"linux /boot/vmlinuz-{kernel} {KERNEL_ARGS}\ninitrd /boot/initrd.img-{kernel}\nboot\n")
        (self.state / "esp" / "EFI" / "BOOT" / "grub.cfg").write_text(cfg)

    def firmware_args(self, kernel: str, console: Path) -> list[str]:
        info = self.info
        if info.get("firmware", "direct") == "direct":
            boot = self.state / "boot"
            return ["-machine", "q35", "-kernel", str(boot / f"vmlinuz-{kernel}"),
                    "-initrd", str(boot / f"initrd.img-{kernel}"), "-append", KERNEL_ARGS,
                    "-serial", f"file:{console}"]
        self.write_grub_cfg(kernel)
        sock = self.state / "serial.sock"
        sock.unlink(missing_ok=True)
        return ["-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on",
                "-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={OVMF_CODE}",
                "-drive", f"if=pflash,format=raw,unit=1,file={self.state / 'efivars.fd'}",
                "-drive", f"if=none,id=esp,format=raw,readonly=on,file=fat:{self.state / 'esp'}",
                "-device", "virtio-blk-pci,drive=esp,bootindex=0",
                "-chardev", f"socket,id=ser0,path={sock},server=on,wait=off,logfile={console}",
                "-serial", "chardev:ser0"]

    def start(self, kernel: str, mok: str = "none") -> None:
        info = self.info
        image = Path(info["image"])
        info["boots"] += 1
        self.save(info)
        console = self.state / f"console-{info['boots']}.log"
        # The root disk comes first, so it is /dev/vda whatever else is attached; a boot index makes OVMF connect
        # it (OVMF connects only the devices it may boot from, and grub must read the kernel from it).
        cmd = ["qemu-system-x86_64", "-name", f"gdrcopy-vm,process=gdrcopy-vm-{self.state.name}", "-nodefaults",
               *accel_args(image, kernel), "-smp", str(info["cpus"]), "-m", str(info["memory"]),
               "-drive", f"file={self.state / 'overlay.qcow2'},format=qcow2,if=none,id=root",
               "-device", "virtio-blk-pci,drive=root,bootindex=1",
               *self.firmware_args(kernel, console),
               "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{info['port']}-:22",
               "-device", "virtio-net-pci,netdev=n0,romfile=", "-device", "virtio-rng-pci",
               "-display", "none", "-monitor", "none",
               "-daemonize", "-pidfile", str(self.state / "qemu.pid")]
        start = time.monotonic()
        # No QEMU gets the caller's stdin (see kvm_works): the daemon outlives this call.
        subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, stdout=sys.stderr)
        info["kernel"] = kernel
        info["console"] = str(console)
        info["pid"] = self.pid()
        self.save(info)
        log(f"booting {kernel} (pid {info['pid']}, ssh port {info['port']}, console {console.name})")
        if mok != "none":
            self.mok_manager(mok, console)
        self.wait_ready(start)

    def mok_manager(self, action: str, console: Path) -> None:
        """Answer MokManager on the serial console, as the operator at the next boot does (docs/VM-TESTING.md)."""
        import pexpect  # the test venv has it; only this path needs it
        from pexpect import fdpexpect

        password = os.environ.get("GDRCOPY_VM_MOK_PASSWORD", "") if action in ("enroll", "delete") else ""
        if action in ("enroll", "delete") and not password:
            self.fail(f"--mok {action} needs the enrollment password in GDRCOPY_VM_MOK_PASSWORD")
        with socket.socket(socket.AF_UNIX) as s:
            for _ in range(50):
                try:
                    s.connect(str(self.state / "serial.sock"))
                    break
                except OSError:
                    time.sleep(0.2)
            con = fdpexpect.fdspawn(s.fileno(), timeout=240, encoding="utf-8", codec_errors="replace")

            def step(expect: str, keys: list[str]) -> None:
                """Wait for a screen by a text only it shows, press keys, then drop what the redraws printed
                (a menu redraws its items on every key, so an old screen must not match the next step)."""
                try:
                    con.expect(expect)
                except (pexpect.TIMEOUT, pexpect.EOF):
                    self.fail(f"MokManager: no '{expect}' on the console")
                for key in keys:
                    time.sleep(1.0)  # MokManager under TCG drops keys sent faster than it redraws
                    con.send(key)
                try:
                    con.expect(pexpect.TIMEOUT, timeout=2)
                except pexpect.EOF:
                    pass
                con.buffer = ""

            down, enter = "\x1b[B", "\r"
            if action == "ignore":
                step("Press any key to perform MOK management", [])
                log("MokManager is up; nobody answers (the request lapses after its countdown)")
                return
            step("Press any key to perform MOK management", [enter])
            # The same keys for both: the request is the main menu's second item (Enroll MOK, or Delete MOK).
            step("Enroll key from disk", [down, enter])   # main menu: Continue boot / Enroll MOK|Delete MOK / ...
            step("View key 0", [down, enter])             # Enroll|Delete MOK: View key 0 / Continue
            step("Yes", [down, enter])                    # Enroll|Delete the key(s)? No / Yes
            step("assword", [password + enter])           # Password:
            step("Reboot", [enter])                       # back at the menu: Reboot
            log(f"MOK {'enrolled' if action == 'enroll' else 'deleted'} at MokManager; the VM reboots")

    def wait_ready(self, start: float) -> None:
        """Wait until sshd answers and systemd has finished starting up."""
        deadline = start + BOOT_TIMEOUT
        while time.monotonic() < deadline:
            if not self.pid():
                self.fail("QEMU exited during boot")
            try:
                r = self.ssh("systemctl", "is-system-running", "--wait", check=False, capture=True, timeout=240)
            except subprocess.TimeoutExpired:
                continue
            state = r.stdout.strip()
            if state in ("running", "degraded"):
                if state == "degraded":
                    failed = self.ssh("systemctl", "--failed", "--no-legend", check=False, capture=True).stdout
                    log(f"system degraded: {failed.strip()}")
                log(f"ready after {time.monotonic() - start:.0f}s ({state})")
                return
            time.sleep(2)
        self.fail(f"not ready after {BOOT_TIMEOUT}s")

    def fail(self, why: str) -> None:
        console = Path(self.info.get("console", ""))
        tail = console.read_text(errors="replace").splitlines()[-40:] if console.is_file() else []
        sys.exit(f"VM {self.state}: {why}\n--- console tail ---\n" + "\n".join(tail))

    def stop(self, timeout: int = 120) -> None:
        """Power the guest off cleanly (so its disk is consistent) and wait for QEMU to exit."""
        pid = self.pid()
        if not pid:
            return
        self.ssh("systemctl", "poweroff", check=False, timeout=30)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.pid():
            time.sleep(1)
        if self.pid():
            log("guest did not power off; killing QEMU")
            self.kill()

    def kill(self) -> None:
        pid = self.pid()
        if not pid:
            return
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            if not self.pid():
                return
            time.sleep(0.2)
        os.kill(pid, signal.SIGKILL)

    def add_mok(self, cert: Path) -> None:
        """Enroll a certificate in the VM's MOK list offline (VM powered off), as if confirmed in MokManager
        earlier: for test fixtures such as the key that signs the stand-in NVIDIA modules (virt-fw-vars)."""
        tool = shutil.which("virt-fw-vars") or str(Path(sys.executable).parent / "virt-fw-vars")
        vars_fd = self.state / "efivars.fd"
        subprocess.run([tool, "-i", str(vars_fd), "-o", f"{vars_fd}.new", "--add-mok", SHIM_LOCK_GUID, str(cert)],
                       check=True, stdout=sys.stderr)
        os.replace(f"{vars_fd}.new", vars_fd)
        log(f"enrolled {cert.name} in the MOK list offline")

    def reboot(self, kernel: str, mok: str = "none", add_mok: Path | None = None) -> dict:
        info = self.info
        kernel = self.resolve_kernel(kernel or info["kernel"], info)
        if info.get("firmware", "direct") == "direct":
            # Take kernel and initrd from the guest: the test may have installed a kernel or rebuilt the initrd.
            boot = self.state / "boot"
            for name in (f"vmlinuz-{kernel}", f"initrd.img-{kernel}"):
                self.fetch(f"/boot/{name}", boot / name)
        log(f"rebooting into {kernel}")
        self.stop()
        if add_mok:
            self.add_mok(add_mok)
        self.start(kernel, mok)
        return self.info

    def root(self) -> Path:
        """The image's root tree as a chroot: extracted once per state dir, mounts (re)made on every call."""
        tree = self.state / "root"
        self.state.mkdir(parents=True, exist_ok=True)
        if not tree.is_dir():
            extract_root(ensure_image(), tree)
        mount_root(tree)
        return tree

    def unroot(self, remove: bool) -> None:
        tree = self.state / "root"
        if tree.is_dir():
            unmount_root(tree)
            if remove:
                shutil.rmtree(tree)  # only once nothing is mounted in it (unmount_root exits otherwise)
                log(f"removed {tree}")

    def down(self) -> None:
        if self.pid():
            self.kill()
            log(f"stopped VM of {self.state}")
        for name in ("overlay.qcow2", "disk.img", "qemu.pid", "id_ed25519", "efivars.fd", "serial.sock"):
            (self.state / name).unlink(missing_ok=True)
        for name in ("boot", "esp"):
            shutil.rmtree(self.state / name, ignore_errors=True)


def default_cpus() -> int:
    """The vCPUs of a VM that `up` is not told: GDRCOPY_VM_CPUS (to try one VM per core when running scenarios side by
    side, which on CI's 2 cores did not pay: docs/CI-HISTORY.md), else 2 where the controller has them."""
    value = os.environ.get("GDRCOPY_VM_CPUS") or ""
    if value:
        if not value.isdigit() or int(value) < 1:
            raise SystemExit("GDRCOPY_VM_CPUS must be a whole number of vCPUs, 1 or more (got %r)" % value)
        return int(value)
    return min(2, os.cpu_count() or 1)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("image").add_argument("--suite", default="", help="Debian suite (%s); default bookworm or "
                                         "GDRCOPY_VM_SUITE" % ", ".join(SUITES))
    for name in ("up", "reboot", "down", "ssh", "info", "root", "unroot"):
        sp = sub.add_parser(name)
        sp.add_argument("--state", required=True, type=Path, help="per-VM state dir (overlay, pid, console logs)")
        if name in ("up", "reboot"):
            sp.add_argument("--kernel", default="default" if name == "up" else "")
        if name == "reboot":
            sp.add_argument("--mok", choices=("none", "enroll", "delete", "ignore"), default="none",
                            help="what to do when MokManager comes up (secureboot firmware)")
            sp.add_argument("--add-mok", type=Path, help="enroll this DER certificate offline while the VM is off")
        if name == "up":
            sp.add_argument("--firmware", choices=("direct", "secureboot"), default="direct")
            sp.add_argument("--memory", type=int, default=2048, help="MiB")
            sp.add_argument("--cpus", type=int, default=default_cpus())
            sp.add_argument("--root-tree", type=Path, help="boot a disk made from this root tree (see `root`)")
            sp.add_argument("--suite", default="", help="the image's Debian suite (%s)" % ", ".join(SUITES))
        if name == "unroot":
            sp.add_argument("--remove", action="store_true", help="delete the tree once it is unmounted")
        if name == "ssh":
            sp.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    if a.cmd == "image":
        print(ensure_image(a.suite))
        return 0
    vm = VM(a.state)
    if a.cmd == "up":
        print(json.dumps(dict(vm.up(a.kernel, a.memory, a.cpus, a.firmware, a.root_tree, a.suite),
                              molecule=vm.molecule_instance())))
    elif a.cmd == "reboot":
        print(json.dumps(vm.reboot(a.kernel, a.mok, a.add_mok)))
    elif a.cmd == "down":
        vm.down()
    elif a.cmd == "ssh":
        cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
        return vm.ssh(*cmd, check=False, stdin=None).returncode
    elif a.cmd == "root":
        print(json.dumps({"root": str(vm.root())}))
    elif a.cmd == "unroot":
        vm.unroot(a.remove)
    elif a.cmd == "info":
        print(json.dumps(vm.info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
