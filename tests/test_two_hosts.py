"""Two GPU hosts and a cache server on this machine: xdist ``--tx ssh=`` workers sharing an ``sftp://`` cache.

Issue 11 item 3. Three network namespaces (h1, h2 and a store) hang off a
bridge of their own (10.213.N.0/24, no route anywhere else); each runs its own
sshd (Debian's openssh-server) under its own host name, and the two hosts each
see a file system without a cache (a tmpfs over their cache mirror and over
the sample project's ``.privleak-cache``), so nothing trained on one host
reaches the other except through the store. The controller runs a copy of the
sample project with one worker on each host and the cache on the store.

Shown: each target is trained exactly once, by a named host (the store's
markers, the run's output), every test and worker of the report names its
host, and the figures equal a one-host ``-n 2`` run with the same seed; then,
with a fresh cache and a short lease, the host holding a lease is killed mid-run
(every process of its namespace): the report names it as crashed, the other
host takes the lease over once it expires and publishes the entry, and every
published entry passes the cache's verifier (``entry_problems``).

Root, ``unshare``, ``ip``, sshd and paramiko are needed; the test skips naming
what is missing. Minutes long (two cold trainings per run on a shared
2-core machine): marked slow.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers_cache import SSHD, make_ssh_keys, wait_for_port, write_sshd_config

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[1] / "sample_project"
#: Two targets (a pin said once, the pin said 100 times), three tests; the second target is needed twice.
SUBSET = ("a_pin_said_once_cannot_be_extracted_from_the_undefended_model or test_pin_exposure_of_undefended_model "
          "or exposure_of_a_pin_that_was_never_in_the_data")
#: Two tests that need the same target: both hosts want it at once, one holds the lease.
ONE_TARGET = "test_pin_exposure_of_undefended_model or exposure_of_a_pin_that_was_never_in_the_data"
LEASE_TTL = 8
RUN_TIMEOUT = 900
HOSTS = ("h1", "h2")


def _missing() -> str | None:
    """Why this machine cannot run the test, or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (network namespaces, tmpfs mounts)"
    for tool in ("ip", "unshare", "ssh", "ssh-keygen", "mount"):
        if shutil.which(tool) is None:
            return f"needs the {tool} command"
    if SSHD is None:
        return "needs sshd: apt-get install openssh-server"
    try:
        import fsspec  # noqa: F401
        import paramiko  # noqa: F401
    except ImportError as exc:
        return f"needs fsspec and paramiko for sftp:// ({exc}): pip install 'pytest-privleak[remote-cache]' paramiko"
    try:
        probe = subprocess.run(["unshare", "--net", "--mount", "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare --net failed: {exc}"
    if probe.returncode != 0:
        return f"cannot create network namespaces here (unshare --net: {probe.stderr.strip()})"
    return None


def _sh(*args: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


class Network:
    """h1, h2 and store namespaces on a private bridge, each with an sshd; ``close()`` removes all of it."""

    def __init__(self, folder: Path, project: Path) -> None:
        tag = f"pl{os.getpid() % 100000}"
        self.folder, self.project = folder, project
        self.net = f"10.213.{os.getpid() % 250}"
        self.bridge = f"{tag}br"
        self.names = {"h1": f"{tag}-h1", "h2": f"{tag}-h2", "store": f"{tag}-st"}
        self.address = {"h1": f"{self.net}.1", "h2": f"{self.net}.2", "store": f"{self.net}.3"}
        self.sshd: dict[str, subprocess.Popen] = {}
        self.made: list[tuple[str, str]] = []      # what to remove: ("bridge", name) / ("netns", name)

    # --- set up ------------------------------------------------------------------------------

    def start(self) -> None:
        _sh("ip", "link", "add", self.bridge, "type", "bridge")
        self.made.append(("bridge", self.bridge))
        _sh("ip", "addr", "add", f"{self.net}.254/24", "dev", self.bridge)
        _sh("ip", "link", "set", self.bridge, "up")
        make_ssh_keys(self.folder)
        (self.folder / "mirror").mkdir()
        for i, (host, ns) in enumerate(self.names.items()):
            _sh("ip", "netns", "add", ns)
            self.made.append(("netns", ns))
            outside, inside = f"{self.bridge[:-2]}v{i}", f"{self.bridge[:-2]}p{i}"
            _sh("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
            _sh("ip", "link", "set", inside, "netns", ns)
            _sh("ip", "link", "set", outside, "master", self.bridge, "up")
            for cmd in (["ip", "addr", "add", f"{self.address[host]}/24", "dev", inside],
                        ["ip", "link", "set", inside, "up"], ["ip", "link", "set", "lo", "up"]):
                _sh("ip", "netns", "exec", ns, *cmd)
            self._start_sshd(host)

    def _start_sshd(self, host: str) -> None:
        env = None
        setup = [f"hostname {host}"]
        if host != "store":   # a host with no cache of its own: tmpfs over its mirror and the project's folder
            env = {"PRIVLEAK_CACHE_MIRROR": self.folder / "mirror", "FSSPEC_SFTP_KEY_FILENAME": self.folder / "user_key"}
            setup += [f"mount -t tmpfs tmpfs {self.folder / 'mirror'}",
                      f"mount -t tmpfs tmpfs {self.project / '.privleak-cache'}"]
        config = write_sshd_config(self.folder, self.address[host], 22, name=f"sshd-{host}", env=env)
        script = " && ".join([*setup, f"exec {SSHD} -D -e -f {config}"])
        log = open(self.folder / f"sshd-{host}.log", "w")
        self.sshd[host] = subprocess.Popen(["ip", "netns", "exec", self.names[host], "unshare", "--mount", "--uts",
                                            "--", "sh", "-c", script], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        problem = wait_for_port(self.address[host], 22, self.sshd[host], timeout=20)
        if problem:
            raise RuntimeError(f"sshd of {host}: {problem}: {(self.folder / f'sshd-{host}.log').read_text()}")

    def ssh_config(self) -> Path:
        path = self.folder / "ssh_config"
        hosts = "".join(f"Host {h}\n  HostName {self.address[h]}\n" for h in HOSTS)
        path.write_text(hosts + f"Host *\n  User root\n  IdentityFile {self.folder / 'user_key'}\n  IdentitiesOnly yes\n"
                        "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  BatchMode yes\n"
                        "  ConnectTimeout 20\n  LogLevel ERROR\n")
        return path

    # --- a host dies, everything goes ----------------------------------------------------------

    def kill_host(self, host: str) -> list[int]:
        """SIGKILL every process of the host's namespace (its sshd, its workers): the host is gone."""
        done = _sh("ip", "netns", "pids", self.names[host], check=False)
        pids = [int(p) for p in done.stdout.split()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return pids

    def close(self) -> None:
        for host in self.sshd:
            with contextlib.suppress(Exception):
                self.kill_host(host)
        for proc in self.sshd.values():
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait(timeout=10)
        for kind, name in reversed(self.made):
            cmd = ["ip", "netns", "del", name] if kind == "netns" else ["ip", "link", "del", name]
            with contextlib.suppress(Exception):
                _sh(*cmd, check=False)


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    why = _missing()
    if why:
        pytest.skip(f"two-host test skipped: {why}")
    folder = tmp_path_factory.mktemp("two-hosts")
    project = folder / "project"
    shutil.copytree(SAMPLE, project, ignore=shutil.ignore_patterns(".privleak-cache", "privleak-report",
                                                                 "__pycache__", ".pytest_cache"))
    (project / ".privleak-cache").mkdir()
    net = Network(folder, project)
    try:
        net.start()
        yield net
    finally:
        net.close()


def _pytest(net: Network, *args: str, popen: bool = False):
    """The sample project's suite from the controller (this namespace), in the project copy."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *args]
    kwargs = dict(cwd=net.project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if popen:
        return subprocess.Popen(command, **kwargs)
    return subprocess.run(command, timeout=RUN_TIMEOUT, **kwargs)


def _tx(net: Network) -> list[str]:
    config = net.ssh_config()
    out = []
    for host in HOSTS:
        out += ["--tx", f"ssh={host}//ssh_config={config}//python={sys.executable}//chdir={net.project}"]
    return ["--dist=load", *out]


def _figures(report: dict) -> dict:
    return {r["key"]: (t["outcome"], r["value"], r["interval"], r["verdict"])
            for t in report["tests"] for r in t["results"]}


def _published(store: Path) -> dict[str, dict]:
    """Every entry the store publishes: key -> its marker (published.json)."""
    return {p.parent.name: json.loads(p.read_text()) for p in store.glob("*/published.json")}


def _verify(store: Path, key: str, marker: dict, scratch: Path) -> list[str]:
    """The cache's own verifier on the published version of ``key`` (sha256 of each file, the key)."""
    from pytest_privleak.cache.manifest import MANIFEST, entry_problems

    folder = scratch / key
    shutil.copytree(store / key / marker["data"], folder)
    (folder / MANIFEST).write_text(json.dumps(marker["manifest"]))
    return entry_problems(folder, key)


def test_two_hosts_train_each_target_once_and_agree_with_one_host(network, tmp_path):
    net = network
    store = net.folder / "store-a"
    started = time.monotonic()
    run = _pytest(net, "-k", SUBSET, *_tx(net), f"--privleak-cache-dir=sftp://{net.address['store']}{store}",
                  f"--privleak-report={net.folder / 'report-hosts'}", "-o", f"privleak_cache_lease_ttl={LEASE_TTL}")
    two_hosts_s = time.monotonic() - started
    out = run.stdout
    assert run.returncode == 0, out[-6000:]
    assert "CacheNotSharedWarning" not in out
    report = json.loads((net.folder / "report-hosts" / "report.json").read_text())
    assert {t["host"] for t in report["tests"]} == set(HOSTS), "one worker on each host ran tests"
    assert {(w["host"], w["hostname"], w["status"]) for w in report["run"]["workers"]} == {
        ("h1", "h1", "ok"), ("h2", "h2", "ok")}

    published = _published(store)
    assert len(published) >= 2, f"two distinct targets at least: {sorted(published)}"
    trainers = {}
    for key, marker in published.items():
        versions = [p.name for p in (store / key).iterdir() if p.name.startswith("v-")]
        assert versions == [marker["data"]], f"{key} was uploaded {len(versions)} times: {versions}"
        trainers[key] = marker["published_by"]["host"]
        assert _verify(store, key, marker, tmp_path) == []
        # the run's output (captured sections of passed tests, -rA) says the same: trained once, by that host
        assert re.findall(rf"cache entry {key[:16]}: trained on host '(\w+)'", out) in ([], [trainers[key]])
    assert set(trainers.values()) <= set(HOSTS) and not list(store.glob("*.lease.json"))
    # the report says it too: per target, the one test whose model was trained (not loaded) ran on that host
    # (results whose target records loaded_from_cache: the exposure ones; CEA's target facts leave it out)
    uses = [(r["target_hash"], t["host"], r["target"].get("loaded_from_cache"), t["nodeid"].split("::")[-1])
            for t in report["tests"] for r in t["results"]]
    assert {h for h, *_ in uses} == set(published)
    flagged = {h for h, _, loaded, _ in uses if loaded is not None}
    assert flagged, uses
    for key in flagged:
        assert [host for h, host, loaded, _ in uses if h == key and loaded is False] == [trainers[key]], uses
    downloads = re.findall(r"cache entry (\w{16}): downloaded from sftp://\S+ \(trained by host '(\w+)'", out)
    assert all(trainers[next(k for k in trainers if k.startswith(short))] == host for short, host in downloads)

    started = time.monotonic()
    local = net.folder / "local-cache"
    one = _pytest(net, "-k", SUBSET, "-n", "2", f"--privleak-cache-dir={local}",
                  f"--privleak-report={net.folder / 'report-n2'}")
    one_host_s = time.monotonic() - started
    assert one.returncode == 0, one.stdout[-6000:]
    reference = json.loads((net.folder / "report-n2" / "report.json").read_text())
    assert _figures(report) == _figures(reference) and len(_figures(report)) >= 3
    print(f"\ntwo hosts: {two_hosts_s:.0f} s, one host -n 2: {one_host_s:.0f} s; trained by: "
          + ", ".join(f"{k[:16]} on {h}" for k, h in sorted(trainers.items()))
          + "; downloaded: " + (", ".join(f"{k} (from {h})" for k, h in downloads) or "none shown"))
    for key, host, loaded, test in sorted(uses):
        how = {True: "loaded", False: "TRAINED", None: "used"}[loaded]
        print(f"  target {key[:16]}: {how} on {host} for {test}")


def test_a_host_killed_while_it_holds_a_lease_is_a_crash_and_the_other_host_takes_over(network, tmp_path):
    net = network
    store = net.folder / "store-b"
    run = _pytest(net, "-k", ONE_TARGET, *_tx(net), "--max-worker-restart=0",
                  f"--privleak-cache-dir=sftp://{net.address['store']}{store}",
                  f"--privleak-report={net.folder / 'report-killed'}", "-o", f"privleak_cache_lease_ttl={LEASE_TTL}",
                  popen=True)
    try:
        deadline, holder = time.monotonic() + 300, None
        while holder is None and time.monotonic() < deadline and run.poll() is None:
            for lease in store.glob("*.lease.json"):
                with contextlib.suppress(OSError, ValueError):
                    holder = json.loads(lease.read_text())
                    key = lease.name[:-len(".lease.json")]
            time.sleep(0.2)
        assert holder is not None, "no host took a lease within 300 s"
        killed_at = time.time()
        dead = holder["host"]
        assert dead in HOSTS and holder["pid"] in net.kill_host(dead)
        out, _ = run.communicate(timeout=RUN_TIMEOUT)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate(timeout=30)
    survivor = next(h for h in HOSTS if h != dead)
    report = json.loads((net.folder / "report-killed" / "report.json").read_text())
    [crashed] = [w for w in report["run"]["workers"] if w["status"] == "crashed"]
    assert crashed["host"] == dead and crashed["crashed_test"], out[-6000:]
    assert f"worker {crashed['id']} on host {dead} crashed while running {crashed['crashed_test']}" in out
    [test] = [t for t in report["tests"] if t["nodeid"] == crashed["crashed_test"]]
    assert (test["outcome"], test["host"]) == ("crashed", dead)

    marker = _published(store)[key]          # the survivor waited out the lease, took it over, published
    assert marker["published_by"]["host"] == survivor and marker["published_by"]["at"] > killed_at
    assert not list(store.glob("*.lease.json"))
    for key_, marker_ in _published(store).items():
        assert _verify(store, key_, marker_, tmp_path) == []
    survived = [t for t in report["tests"] if t["host"] == survivor]
    assert survived and all(t["outcome"] in ("passed", "xfailed") and t["results"] for t in survived), out[-6000:]
    print(f"\nkilled {dead} (PID {holder['pid']} held the lease of {key[:16]}); {survivor} published it "
          f"{marker['published_by']['at'] - killed_at:.0f} s later")
