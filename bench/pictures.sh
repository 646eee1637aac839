#!/usr/bin/env bash
# The README's pictures, remade from the shipped checkpoints (run from the repository root; MNIST in ../shared):
# the hero's solved photo and ordered clip, and the eps-against-x0 curves.
set -eu
python -m bench.animate --ckpt checkpoints/image-photos-3x3.pt --image docs/photos/chelsea.jpg --out /tmp/hero
cp /tmp/hero/chelsea_solving.gif docs/
python -m bench.animate --ckpt checkpoints/video-mmnist-10x2.pt --dataset movingmnist --data-dir ../shared/data/mnist \
    --out /tmp/mm
cp /tmp/mm/solving.gif docs/video-mmnist-10x2-solving.gif
python -m bench.eps_curves runs/eps     # docs/eps-vs-x0.png and its rows, from the runs of bench/eps_curves.py
