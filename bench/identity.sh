#!/usr/bin/env bash
# usage: PY=python bench/identity.sh TREE OUT — the README's scoring commands on the shipped checkpoints of the
# checkout TREE (the gap model at 4 samples x 2 passes) and the Quickstart's EMA weights after 400 steps (sha256), into
# OUT: run it on two trees and compare (bench/notes.md, "The restructure, proven bit-identical")
set -u
tree=$1; out=$2; mkdir -p $out; cd $tree
py=${PY:-python}
$py sample.py --ckpt checkpoints/image-photos-3x3.pt --seed 1 --sampler ddim --repeats 8 --out $out/photos > $out/photos.log 2>&1
$py sample.py --ckpt checkpoints/image-photos-3x3-gap.pt --missing 0 --samples 4 --repeats 2 --sampler ddpm --out $out/gap > $out/gap.log 2>&1
$py sample.py --ckpt checkpoints/image-shapes-3x3.pt --seed 1 --sampler ddim --out $out/shapes > $out/shapes.log 2>&1
$py sample.py --ckpt checkpoints/video-digits-5x4.pt --seed 1 --sampler ddim --out $out/digits > $out/digits.log 2>&1
$py sample.py --ckpt checkpoints/video-mmnist-10x2.pt --seed 1 --sampler ddim --out $out/mmnist > $out/mmnist.log 2>&1
$py sample.py --ckpt checkpoints/video-mmnist-5x4.pt --seed 1 --sampler ddim --out $out/mmnist5x4 > $out/mmnist5x4.log 2>&1
OMP_NUM_THREADS=1 $py train_image.py --max-steps 400 --out $out/qs > $out/qs.log 2>&1
$py -c "
import torch,hashlib,sys
ck=torch.load('$out/qs/ckpt.pt',weights_only=False)
h=hashlib.sha256()
for k,v in sorted(ck['ema'].items()): h.update(k.encode()); h.update(v.cpu().contiguous().numpy().tobytes())
print(h.hexdigest())" > $out/qs_ema.sha
echo finished > $out/DONE
