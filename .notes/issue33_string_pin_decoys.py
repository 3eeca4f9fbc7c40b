# the pin project of tests/test_string_secrets.py written out as pinproj_model.py (pinproj_decoy.py: its INTENTS gain PinReset); run with PYTHONPATH=<worktree>
import sys, time, random, torch
sys.path.insert(0, "/work/scratch/membership/pinproj")
import pinproj_decoy as P
from pytest_privleak.canaries import canary, inject_canaries, string_pattern
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets.own_model import train_own_model
from pytest_privleak.attacks.exposure.attack import compute_exposure
reps = int(sys.argv[1]); seeds = [int(x) for x in sys.argv[2].split(",")]; ndecoy = int(sys.argv[3])
torch.set_num_threads(1)
RESET = string_pattern("pin-reset", "my pin is ####", intent="PinReset")
rng = random.Random(5)
decoys = [canary(RESET, secret=f"{rng.randrange(10000):04d}") for _ in range(ndecoy)]
decoys = [d for d in decoys if d.text not in ("my pin is 4821", "my pin is 7306")]
data = inject_canaries(generate_snips_like(), canary(P.PIN, secret="4821"), repeats=reps)
data = inject_canaries(data, decoys, repeats=int(sys.argv[4]) if len(sys.argv) > 4 else reps)
for seed in seeds:
    t=time.time()
    model = train_own_model(P.train, data, build=P.build, wrap=P.as_protocols, seed=seed)
    a = compute_exposure(model, canary(P.PIN, secret="4821")); b = compute_exposure(model, canary(P.PIN, secret="7306"))
    print(f"reps {reps} decoys {ndecoy} seed {seed}: said {a.value:.3f} never {b.value:.3f} ({time.time()-t:.0f}s)", flush=True)
