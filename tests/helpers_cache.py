"""Pieces the URL-cache tests share: a JSON entry's save/load, and a host process that builds one entry."""
import json
from pathlib import Path


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
from pytest_privleak.cache_remote import RemoteTargetCache
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
