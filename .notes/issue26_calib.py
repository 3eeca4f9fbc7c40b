import time, torch, sys
torch.set_num_threads(1)
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak.attacks.exposure_assertion import measure_exposure
kind=sys.argv[1]; n=int(sys.argv[2]); ep=int(sys.argv[3]); R=int(sys.argv[4])
data=generate_snips_like(n_train=n, n_valid=50, n_test=50, seed=0)
pin=canary("pin",4,seed=0)
inj=inject_canaries(data,[pin],repeats=R,seed=0)
for s in range(int(sys.argv[5])):
    t=time.time(); m=train_target(kind, inj, seed=s, epochs=ep); t1=time.time()-t
    t=time.time(); r=measure_exposure(m,pin); t2=time.time()-t
    print(kind,n,ep,R,s,f"train {t1:.1f}s exp {t2:.1f}s", r.value, flush=True)
