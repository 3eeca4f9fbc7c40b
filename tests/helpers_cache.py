"""Pieces the URL-cache tests share: a JSON entry's save/load, a host process that builds one entry, and a
real sshd (Debian's openssh-server) with generated keys, as the SFTP and two-host tests start it."""
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

#: The OpenSSH server, or None where it is not installed (tests then skip, naming openssh-server).
SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)


def save_value(obj, folder: Path) -> dict:
    """Writes the entry; its metadata ``{"what": "test"}`` lets a test check that the manifest travelled too."""
    (folder / "value.json").write_text(json.dumps(obj))
    return {"what": "test"}


def load_value(folder: Path):
    return json.loads((folder / "value.json").read_text())


#: ``python -c HOST_PROCESS % key url mirror host log [storage-options-json]``: one host that builds the entry
#: (logging its name to ``log``, then sleeping 1 s so the other host must wait) or loads it; prints the outcome.
HOST_PROCESS = """
import json, sys, time
from pytest_privleak.cache.remote import RemoteTargetCache
url, mirror, host, log = sys.argv[1:5]
options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
def build():
    with open(log, "a") as f:
        f.write(host + "\\n")
    time.sleep(1.0)
    return {"by": host}
def save(obj, folder):
    (folder / "value.json").write_text(json.dumps(obj))
    return {}
cache = RemoteTargetCache(url, mirror_dir=mirror, host=host, lease_poll=0.05, storage_options=options)
obj, loaded = cache.get_or_build("%s", build, save, lambda f: json.loads((f / "value.json").read_text()))
print(json.dumps({"obj": obj, "loaded": loaded}))
"""


def make_ssh_keys(folder: Path) -> None:
    """``host_key`` for the server, ``user_key`` (and ``authorized_keys`` allowing it) for the clients."""
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True,
                       timeout=60)
    shutil.copy(folder / "user_key.pub", folder / "authorized_keys")


def write_sshd_config(folder: Path, address: str, port: int, *, name: str = "sshd", env: dict | None = None) -> Path:
    """An sshd config listening on ``address:port`` that only ``folder/user_key`` logs into, with SFTP.

    ``env``: variables every session gets (sshd's ``SetEnv``), e.g. where that host mirrors the cache.
    """
    lines = [f"Port {port}", f"ListenAddress {address}", f"HostKey {folder / 'host_key'}",
             f"PidFile {folder / (name + '.pid')}", f"AuthorizedKeysFile {folder / 'authorized_keys'}",
             "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password",
             "StrictModes no", "UsePAM no", "Subsystem sftp internal-sftp"]
    if env:
        lines.append("SetEnv " + " ".join(f"{k}={v}" for k, v in env.items()))
    path = folder / f"{name}_config"
    path.write_text("\n".join(lines) + "\n")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)           # sshd's privilege-separation folder
    return path


def wait_for_port(address: str, port: int, proc: subprocess.Popen, timeout: float = 10.0) -> str | None:
    """None once ``address:port`` accepts connections; else why not (sshd exited, with its stderr, or timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"sshd exited with status {proc.returncode}"
        with socket.socket() as s:
            s.settimeout(1.0)
            if s.connect_ex((address, port)) == 0:
                return None
        time.sleep(0.05)
    return f"sshd did not listen on {address}:{port} within {timeout:.0f} s"
