#!/usr/bin/env bash
# One device call (issue 70): (1) eps against x0 on the built-in shapes, one code per piece and the authors' way (a
# code per token, --codes token), 4 tokens per piece (--patch-size 8), everything else the Quickstart's, 8 runs side
# by side on the one GPU, fp32; (2) the design card's command on ImageNet-sized JPEGs made from the photos (carried as
# .photos), prepared once (python -m sources.prepare), for as long as the call allows: steps/s and data wait.
export PYTHONUNBUFFERED=1
R=/tmp/runs; mkdir -p $R; nvidia-smi -L > $OUT/gpu.txt; python3 -c "import torch;print(torch.__version__)" >> $OUT/gpu.txt
EPS=${EPS:-330}
S="--patch-size 8 --max-steps 10000 --eval-every 1000 --eval-puzzles 200 --precision fp32 --device cuda --workers 1"
job() { name=$1; shift; (timeout $EPS python3 train_image.py $S --out $R/$name "$@" > $R/$name.out 2>&1) & }
job x0-piece --prediction x0
job eps-piece --prediction eps
job x0-token8 --prediction x0 --codes token --code-dim 8
job eps-token8 --prediction eps --codes token --code-dim 8
job eps-token8-lr1e-3 --prediction eps --codes token --code-dim 8 --lr 1e-3
job eps-token8-lr5e-4 --prediction eps --codes token --code-dim 8 --lr 5e-4
job x0-token32 --prediction x0 --codes token --code-dim 32
job eps-token32 --prediction eps --codes token --code-dim 32
wait
for f in $R/*/log.txt; do echo "=== $f"; grep -v "^step [0-9]*[1-9]50 \|^step [0-9]*[1-9]00 " $f; done > $OUT/eps-logs.txt
for f in $R/*.out; do echo "=== $f"; tail -c 1500 $f | tr '\r' '\n' | grep -v "it/s" | tail -5; done >> $OUT/eps-logs.txt
# (2) the design card's command, prepared loader
python3 -c "from bench.loader import imagenet_sized; imagenet_sized('.photos', '/tmp/inet', count=${IMAGES:-3000})"
python3 -m sources.prepare --data-dir /tmp/inet --out /tmp/inet-255 --workers 16 > $R/prepare.out 2>&1
tail -c 300 $R/prepare.out >> $OUT/design.txt
timeout ${CARD:-150} python3 train_image.py --dataset imagenet --data-dir /tmp/inet-255 --grid 3 --workers 15 \
  --max-steps 100000 --log-every 20 --out $R/card > $R/card.out 2>&1
cat $R/card/log.txt >> $OUT/design.txt; tail -c 2000 $R/card.out | tr '\r' '\n' | grep -v "it/s" >> $OUT/design.txt
nvidia-smi --query-gpu=memory.used --format=csv >> $OUT/gpu.txt
