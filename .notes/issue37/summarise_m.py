"""Summarise exp_choose_m output: per (m, R): mean of per-seed means, sd of per-seed means, mean canary sd."""
import json, sys, collections, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows:
    by[(r["m"], r["R"])].append(r)
for (m, R), rs in sorted(by.items()):
    means = [st.fmean(r["exposure"]) for r in rs]
    all_ = [v for r in rs for v in r["exposure"]]
    within = st.fmean([st.stdev(r["exposure"]) for r in rs]) if m > 1 else float("nan")
    print(f"m={m:2d} R={R}: seeds {len(rs)} grand mean {st.fmean(all_):.2f}  sd(seed means) {st.stdev(means):.2f}"
          f"  sd(all cells) {st.stdev(all_):.2f}  mean within-seed sd {within:.2f}  "
          f"score {st.fmean(r['score_s'] for r in rs):.1f}s train {st.fmean(r['train_s'] for r in rs):.1f}s")
