"""Re-read the logged per-seed pools of bench_seeds with the gate's rule after review M4 (Welch p < alpha AND the
mean beyond the 1-bit tolerance): no training, the same pair sampling and bootstrap as the bench."""
import re
import sys

sys.path.insert(0, "bench")
import bench_seeds as b  # noqa: E402

for log in sys.argv[1:]:
    text = open(log).read()
    pools = {int(r): [float(x) for x in v.split()] for r, v in re.findall(r"R=(\d+): ([\d. ]+?)\s+mean", text)}
    base, run = pools[10], pools[20]
    print(log, "seeds per pool", len(base))
    for k in (3, 5, 7):
        for rule, tol in (("p only (before)", -1e9), ("p and tolerance", 1.0)):
            b.TOLERANCE = tol   # -1e9: every shift is "beyond", so only the test decides (the rule before M4)
            fa = b.bootstrap(base, base, k, 400, 200, 1, True)
            de = b.bootstrap(base, run, k, 400, 200, 2, False)
            print(f"  k={k} {rule:16s}: false alarm {fa[0]:.1%} [{fa[1]:.1%}, {fa[2]:.1%}]  "
                  f"detection {de[0]:.1%} [{de[1]:.1%}, {de[2]:.1%}]")
