# the pin project of tests/test_string_secrets.py written out as pinproj_model.py (pinproj_decoy.py: its INTENTS gain PinReset); run with PYTHONPATH=<worktree>
import sys, time, torch
sys.path.insert(0, "/work/scratch/membership/pinproj")
import pinproj_model as P
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets.own_model import train_own_model
from pytest_privleak.attacks.exposure.attack import compute_exposure
reps = int(sys.argv[1]); seeds = [int(x) for x in sys.argv[2].split(",")]; threads = int(sys.argv[3]) if len(sys.argv)>3 else 1
torch.set_num_threads(threads)
base = generate_snips_like()   # the nlu_dataset fixture's default? checked below
data = inject_canaries(base, canary(P.PIN, secret="4821"), repeats=reps)
for seed in seeds:
    t=time.time()
    model = train_own_model(P.train, data, build=P.build, wrap=P.as_protocols, seed=seed)
    a = compute_exposure(model, canary(P.PIN, secret="4821")); b = compute_exposure(model, canary(P.PIN, secret="7306"))
    print(f"reps {reps} seed {seed} threads {threads}: said {a.value:.3f} never {b.value:.3f} ({time.time()-t:.0f}s)", flush=True)
