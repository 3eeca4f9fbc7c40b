"""Summarise the issue 32 counts (.notes/issue32_counts_white.jsonl: the white-box rows of the first run;
.notes/issue32_counts_sampling.jsonl: the sampler rows, rerun after the neighbour tolerance went to an eighth of a
record) as the table of .notes/issue32_notes.md."""
import json
from collections import defaultdict

rows = [json.loads(line) for name in (".notes/issue32_counts_white.jsonl", ".notes/issue32_counts_sampling.jsonl")
        for line in open(name)]
groups = defaultdict(list)
for r in rows:
    key = (r["audit"], r["loop"], r["bug"], r.get("groups", ""), r.get("claim", ""))
    groups[key].append(r)
print("| audit | loop | bug | claim | seeds | flagged | refused | figure min / median / max |")
print("|---|---|---|---|---|---|---|---|")
for (audit, loop, bug, groups_, claim), items in groups.items():
    refused = sum("refused" in r for r in items)
    if audit == "white-box":
        values = sorted(r["eps_lcb"] for r in items if "eps_lcb" in r)
        flagged = sum(r["flagged"] for r in items)
        fig = "ε_lcb " + " / ".join(f"{v:.2f}" for v in (values[0], values[len(values) // 2], values[-1])) if values \
            else "refused: " + items[0]["refused"][:90]
    else:
        values = sorted(r["p_value"] for r in items)
        flagged = sum(r["p_value"] <= 0.001 for r in items)
        failed = sorted({r["failed"] for r in items if r["p_value"] <= 0.001})
        fig = "p " + " / ".join(f"{v:.2g}" for v in (values[0], values[len(values) // 2], values[-1]))
        if failed:
            fig += "; failed: " + " | ".join(failed)
    name = bug + (f", groups={groups_}" if groups_ else "")
    print(f"| {audit} | {loop} | {name} | {claim} | {len(items)} | {flagged} | {refused} | {fig} |")
