"""Warm -n 0 then warm -n 2 of the sample project on one cache folder (targets already cached), with a frozen
copy of the current package (as bench/bench_suite.py does); prints how many results each run loaded."""
import shutil, sys, tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import bench_suite as b

kept = Path(sys.argv[1])
extra = sys.argv[2:]
work = Path(tempfile.mkdtemp(prefix="privleak-warm-pair-"))
project = b.copy_sample(work)
env = b.snapshot_package(work / "package")
cache = work / "cache"
shutil.copytree(kept, cache)
runs = {"warm n0": b.run_suite(project, cache, work / "report-n0", *extra, env=env),
        "warm n2": b.run_suite(project, cache, work / "report-n2", "-n", "2", *extra, env=env)}
for name, run in runs.items():
    print(b.line(name, run)); print("   ", run["cache_line"])
print("figures:", b.compare(runs))
print("kept", work)
