"""
Training and sampling throughput of the paper's DiT (base, 3x3 puzzles of 64 px pieces in 16 px patches) on one
device: steps/s, model FLOPs per step and MFU (model FLOP/s over the device's dense bf16 peak, PEAK_TFLOPS), in fp32,
bf16 and bf16 + torch.compile; DDIM-50 puzzles/s beside the fp32 rows. And its GPU memory, estimated on the CPU.

    python -m bench throughput                  # CPU: batch 8
    python -m bench throughput --device cuda    # GPU: batch 64 and 256 (on a lent GPU: bench/gpu.py)
    python -m bench memory-estimate

FLOPs are counted once per model and batch by torch.utils.flop_counter over one forward and backward pass of
jpdvt.puzzle_loss (matmuls, convolutions and attention; elementwise work is not counted, as in MFU figures).
"""
import time
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from diffusion import GaussianDiffusion
from dit import CONFIGS as DIT_CONFIGS
from dit import DiT
from jpdvt import SampleOptions, anchor_pieces, position_table, puzzle_loss, solve
from plumbing.cli import autocast
from posenc import grid_table
from puzzles import ImageConfig, collate, puzzle_set
from unet3d import UNet3D

# dense bf16 tensor-core peak, TFLOP/s (vendor data sheets, without sparsity); the first name that occurs in
# torch.cuda.get_device_name() is used
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 125.0, "RTX 4090": 165.0}
PRECISIONS = [("fp32", False), ("bf16", False), ("bf16", True)]   # (autocast, torch.compile)


def settings(gpu):
    """(row name, network, puzzle settings, batch) of the rows to measure on this kind of device."""
    net = replace(DIT_CONFIGS["base"], piece_size=64, patch_size=16)
    return [(f"dit-base b{b}", net, ImageConfig(piece_size=64), b) for b in ((64, 256) if gpu else (8,))]


def peak_flops(device):
    """The device's dense bf16 peak in FLOP/s, or None (CPU, unknown GPU)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((tf * 1e12 for key, tf in PEAK_TFLOPS.items() if key in name), None)


def timed(fn, device):
    """Seconds one call of fn takes on `device` (CUDA: synchronised before and after)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.time()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.time() - t


def train_step_of(puzzle, net_cfg, batch, device, precision="fp32", compiled=False):
    """(train_step, model): one step of puzzle_loss, backward and AdamW (no EMA update) on `batch`, already on
    `device`, for a fresh network of `net_cfg` (seed 0) on puzzles of `puzzle`'s settings."""
    torch.manual_seed(0)
    model = (DiT if puzzle.kind == "image" else UNet3D)(net_cfg).to(device)
    net = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), fused=device.type == "cuda")
    table = position_table(SimpleNamespace(puzzle=puzzle, model=net_cfg)).to(device)
    diffusion, given = GaussianDiffusion(1000, "x0"), anchor_pieces(batch, puzzle.anchor)

    def train_step():
        with autocast(device, precision):
            loss = puzzle_loss(net, diffusion, batch, table=table, given=given, weights=None)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    return train_step, model


def measure(device, steps=10, only=None):
    """Rows {name: metrics} of every setting on `device` (or of the settings named in `only`), each precision in turn
    (first step: warm-up)."""
    gpu, peak, rows = device.type == "cuda", peak_flops(device), {}
    for name, net_cfg, puzzle, batch in settings(gpu):
        if only is not None and name not in only:
            continue
        data = puzzle_set(puzzle, "train", 0)
        b = {k: v.to(device) for k, v in collate([data[i] for i in range(batch)]).items()}
        table = position_table(SimpleNamespace(puzzle=puzzle, model=net_cfg)).to(device)
        given, flops = anchor_pieces(b, puzzle.anchor), None
        for precision, compiled in PRECISIONS:
            train_step, model = train_step_of(puzzle, net_cfg, b, device, precision, compiled)
            if flops is None:
                with FlopCounterMode(display=False) as counter:
                    train_step()
                flops = counter.get_total_flops()
            times = [timed(train_step, device) for _ in range(steps + 1 if gpu or batch <= 16 else 3)]
            rate = 1 / float(np.median(times[1:]))
            m = {"steps_per_s": rate, "batch": batch, "gflop_per_step": flops / 1e9, "tflop_per_s": flops * rate / 1e12,
                 "params_M": sum(p.numel() for p in model.parameters()) / 1e6}
            if peak:
                m["mfu"] = flops * rate / peak
            if precision == "fp32":
                opts, diffusion = SampleOptions(steps=50, sampler="ddim"), GaussianDiffusion(1000, "x0")
                m["puzzles_per_s_ddim50"] = batch / timed(lambda: solve(model.eval(), diffusion, b, table=table,
                                                                        opts=opts, given=given), device)
            rows[f"throughput {name} {precision}{' compile' if compiled else ''}"] = m
    return rows


def memory_estimate(batch=256, measured=2):
    """Row: the GPU memory of one training step of the paper's DiT (base) at `batch` puzzles of 3x3 64 px pieces,
    estimated on the CPU: the bytes autograd saves for the backward of `measured` puzzles under bf16 autocast,
    scaled to `batch`, plus fp32 weights, gradients, AdamW's two moments and the EMA. Not measured on a GPU (its
    kernels save somewhat other tensors)."""
    model = DiT(DIT_CONFIGS["base"])
    params = sum(p.numel() for p in model.parameters())
    data = {"content": torch.randn(measured, 9, 3, 64, 64), "missing": torch.zeros(measured, 9, dtype=torch.bool),
            "true_pos": torch.stack([torch.randperm(9) for _ in range(measured)])}
    saved = {}

    def keep(t):
        saved[t.data_ptr()] = t.numel() * t.element_size()
        return t
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t), torch.autocast("cpu", dtype=torch.bfloat16):
        puzzle_loss(model, GaussianDiffusion(1000, "x0"), data, grid_table(3, 3), anchor_pieces(data, True), None)
    per_puzzle = sum(saved.values()) / measured
    return {f"memory estimate dit-base b{batch} bf16": {
        "params_M": params / 1e6, "activations_gib_per_puzzle": per_puzzle / 2 ** 30,
        "state_gib": params * 4 * 5 / 2 ** 30, "estimated_gib": (per_puzzle * batch + params * 4 * 5) / 2 ** 30,
        "batch": batch}}
