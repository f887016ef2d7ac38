"""A draft tree after n ids: one model call under the tree's mask against the ids alone,
then the tree (``TransformersRunner``'s split, ``TREE_SPLIT``). Process CPU time, one
torch thread, random weights of the ``qwen2.5-0.5b`` shape; the smaller of REPS runs.

    OMP_NUM_THREADS=1 python scripts/tree_split.py 256,512,1024,2048,4096,7655 2

Prints one JSON line per n: CPU seconds of each way, the largest logit difference and
whether every row's argmax agrees.
"""
import sys, time, json, random
import torch
torch.set_num_threads(1)
from cad_outlines.tools import models
import cad_outlines.decoding.runner as R

model = models.load("qwen2.5-0.5b").model
runner = R.TransformersRunner(model)
tree, parents = [11, 12, 13, 14, 15, 16, 17, 18], [-1, 0, 1, 2, 0, -1, 5, 6]
rng = random.Random(0)
out = []
for n in [int(x) for x in sys.argv[1].split(",")]:
    ids = [rng.randrange(1000, 100000) for _ in range(n)]
    times = {"one": [], "split": []}
    rows = {}
    for rep in range(int(sys.argv[2])):
        for mode in ("one", "split"):
            R.TREE_SPLIT = 10**9 if mode == "one" else 256
            cache = runner.new_cache()
            t = time.process_time()
            rows[mode] = runner.forward_tree(ids, tree, parents, cache)
            times[mode].append(time.process_time() - t)
    diff = float((rows["one"] - rows["split"]).abs().max())
    rec = {"n": n, "one": min(times["one"]), "split": min(times["split"]), "max_abs_diff": diff,
           "argmax_same": bool((rows["one"].argmax(-1) == rows["split"].argmax(-1)).all())}
    out.append(rec); print(json.dumps(rec), flush=True)
