#!/usr/bin/env bash
# One device call: the paper's Moving MNIST 10 x 2 recipe (64 px, paper U-Net, batch 32, lr 1e-4) for as long as
# the call allows, beside three tiny-U-Net 32 px calibration runs; each scored on 1000 test clips (seed 1, DDIM-50).
export PYTHONUNBUFFERED=1
R=/tmp/runs; mkdir -p $R; nvidia-smi -L > $OUT/gpu.txt; python3 -c "import torch;print(torch.__version__)" >> $OUT/gpu.txt
M=.mnist; TRAIN=${TRAIN:-380}
MM="--dataset movingmnist --data-dir $M --workers 3 --ckpt-every ${CKPT:-500} --eval-every 2000"
T32="--size 32 --schedule cosine --eval-puzzles 32"
score() { timeout ${SCORE:-130} python3 sample.py --ckpt $R/$1/ckpt.pt --num-puzzles 1000 --seed 1 --sampler ddim --steps 50 \
  --batch-size 250 --out $R/$1/test > $R/$1/score.log 2>&1; cp $R/$1/test/metrics.json $OUT/$1-metrics.json; }
job() { name=$1; shift; (timeout $TRAIN python3 train_video.py $MM --out $R/$name "$@" > $R/$name.log 2>&1;
  score $name; tail -c 3000 $R/$name.log | tr '\r' '\n' | grep -v "it/s" > $OUT/$name.log) & }
job paper-10x2 --pieces 10 --frames-per-piece 2 --paper
job tiny-20x1-b32 $T32 --pieces 20 --frames-per-piece 1 --lr 5e-4 --batch-size 32 --curriculum 3 6000 --max-steps 12000
job tiny-20x1-b32-slow $T32 --pieces 20 --frames-per-piece 1 --lr 5e-4 --batch-size 32 --curriculum 3 9000 --max-steps 18000
job tiny-10x2-b32 $T32 --pieces 10 --frames-per-piece 2 --lr 5e-4 --batch-size 32 --curriculum 3 2000 --max-steps 16000
wait; ls $R; nvidia-smi --query-gpu=memory.used --format=csv >> $OUT/gpu.txt
