#!/bin/sh
# usage: sh bench/ship-missing.sh runs/bench/image-photos-3x3-missing-ft-8k/ckpt.pt 8 (in runs/ship/: mkdir -p runs/ship)
# ship the masked-photo model: export with its estimator (S samples, DDIM-50, chosen on val), score val, score
# test once, the classic solvers on the same test puzzles, and the drawn pieces on val (rows, docs/photos-missing.png)
set -e
. .venv/bin/activate
SRC=$1; S=$2
python -m bench --export $SRC checkpoints/image-photos-3x3-missing.pt
python -c "
import torch
ck = torch.load('checkpoints/image-photos-3x3-missing.pt', weights_only=True)
ck['sampling'] = {'steps': 50, 'sampler': 'ddim', 'samples': $S, 'assign': 'hungarian'}
torch.save(ck, 'checkpoints/image-photos-3x3-missing.pt')
"
for k in 0 1 2 3; do
  python sample.py --ckpt checkpoints/image-photos-3x3-missing.pt --split val --missing $k \
    --repeats 8 --seed 1 --out runs/ship/cal-$k > runs/ship/cal-$k.log 2>&1
done
# the test runs take the estimator stored above (DDIM-50, S samples: their metrics.json says so)
for k in 0 1 2 3; do
  python sample.py --ckpt checkpoints/image-photos-3x3-missing.pt --missing $k --repeats 8 --seed 1 \
    --out runs/ship/test-$k > runs/ship/test-$k.log 2>&1
done
python -c "
import json
from bench.report import save_result
for split, pre in (('val', 'cal'), ('test', 'test')):
    for k in range(4):
        m = json.load(open(f'runs/ship/{pre}-{k}/metrics.json'))
        flags = '--split val ' if split == 'val' else ''
        save_result(f'image-photos-3x3-missing {split} missing {k}', {'group': 'masked', 'train_minutes': 0.0,
            'command': f'python sample.py --ckpt checkpoints/image-photos-3x3-missing.pt {flags}--missing {k} --repeats 8 --seed 1 --out runs/ship/{pre}-{k}',
            'note': 'the shipped masked-photo model (export of $SRC); test scored once, with the estimator chosen on val', 'metrics': m})
"
python -c "
from bench.baselines import image_baselines
from bench.recipes import PHOTOS, PHOTO_PASSES
for k in (1, 2, 3):
    image_baselines('folder', PHOTOS, (3, 3), 24, 0, k, PHOTO_PASSES)
" > runs/ship/baselines.log 2>&1
python -m bench.drawn checkpoints/image-photos-3x3-missing.pt --missing 1 > runs/ship/drawn1.log 2>&1
python -m bench.drawn checkpoints/image-photos-3x3-missing.pt --missing 2 --picture docs/photos-missing.png > runs/ship/drawn2.log 2>&1
echo done > runs/ship/done
