"""Issue 37 item 3 on trained models: the LSTM LM at its default 12 epochs, the fixture's 8 pins said 4 times (the
baseline, seeds 0-6) and 8 times (the run, the same seeds): what the gate says (from the bench's figures.json)."""
import json, sys
sys.path.insert(0, "bench")
from bench_seeds import report
from pytest_privleak.report.gate import DEFAULT_TOLERANCES, compare, gate_lines

saved = json.load(open(".privleak-bench-cache/seeds/figures.json"))
base = saved["lm|epochs=default|R=4|m=8|pool=7"]
run = saved["lm|epochs=default|R=8|m=8|pool=7"]
old = report(base["table"], base["fingerprint"], base["ceiling"], base["metric"], list(range(7)))
old["tests"][0]["results"][0]["tolerance"] = DEFAULT_TOLERANCES[base["metric"]]
new = report(run["table"], run["fingerprint"], run["ceiling"], run["metric"], list(range(7)))
print("\n".join(gate_lines(compare(new, old, {}, "baseline.json"))))
