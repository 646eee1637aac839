"""Pseudo-3D U-Net: shapes, zero init, block layout, piece-permutation equivariance, a few training steps, input
checks."""
import pytest
import torch

from diffusion import GaussianDiffusion
from posenc import sequence_table
from unet3d import CONFIGS, Attention2Plus1D, Level, ResBlock, UNet3D

TINY = CONFIGS["tiny"]


def make_inputs(b=2, n=5, f=4, c=1, h=32, w=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    code = torch.randn(b, n, 16, generator=g)
    content = torch.randn(b, n, f, c, h, w, generator=g)
    t = torch.randint(0, 1000, (b,), generator=g)
    missing = torch.zeros(b, n, dtype=torch.bool)
    missing[:, 2] = True
    return code, content, t, missing


def randomize_heads(model):
    """Give the zero-initialised output layers random weights so that outputs depend on the inputs."""
    torch.manual_seed(1)
    for m in model.modules():
        if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)) and m.weight.abs().sum() == 0:
            torch.nn.init.normal_(m.weight, std=0.05)


@pytest.mark.parametrize("h,w", [(32, 32), (16, 48)])
def test_shapes_and_zero_init(h, w):
    torch.manual_seed(0)
    model = UNet3D(TINY)
    code, content, t, missing = make_inputs(h=h, w=w)
    code_out, content_out = model(code, content, t, missing, torch.ones_like(missing))
    assert code_out.shape == (2, 5, 16) and content_out.shape == (2, 5, 4, 1, h, w)
    assert code_out.abs().max() == 0 and content_out.abs().max() == 0


def test_blocks_as_the_docstring_says():
    """A level has one attention layer per resnet block (the paper's text: one per block); an initialised resnet
    block is its skip: the identity when the width stays, a 1x1 projection when it changes."""
    paper = CONFIGS["paper"]
    level = Level(64, 64, paper.layers_per_block, emb_dim=256, cfg=paper, attn=True)
    assert len(level.res) == len(level.attn) == 3
    assert all(isinstance(a, Attention2Plus1D) for a in level.attn)
    model = UNet3D(TINY)                                            # initialize_weights zeroes every conv2
    x, emb = torch.randn(3, 16, 8, 8), torch.randn(3, 64)
    same, wider = model.down[0].res[0], model.up[0].res[0]           # 16 -> 16, 32 (skip concat) -> 16
    assert isinstance(same, ResBlock) and torch.equal(same(x, emb), x)
    x2 = torch.randn(3, 32, 8, 8)
    assert isinstance(wider.skip, torch.nn.Conv2d) and torch.allclose(wider(x2, emb), wider.skip(x2))


def test_permutation_equivariance_over_pieces():
    torch.manual_seed(0)
    model = UNet3D(TINY)
    randomize_heads(model)
    model.eval()
    code, content, t, missing = make_inputs()
    anchor = torch.zeros_like(missing)
    anchor[:, 0] = True                                             # piece 0's code is given clean
    perm = torch.tensor([3, 0, 4, 1, 2])
    with torch.no_grad():
        p1, c1 = model(code, content, t, missing, anchor)
        p2, c2 = model(code[:, perm], content[:, perm], t, missing[:, perm], anchor[:, perm])
        p0, _ = model(code, content, t, missing, torch.zeros_like(missing))   # no anchor: a different conditioning
    assert p1.abs().max() > 1e-3 and c1.abs().max() > 1e-3          # outputs are not trivially zero
    assert torch.allclose(p1[:, perm], p2, atol=1e-4)
    assert torch.allclose(c1[:, perm], c2, atol=1e-4)
    assert not torch.allclose(p0, p1, atol=1e-4)


def test_few_adam_steps_lower_the_loss():
    torch.manual_seed(0)
    model = UNet3D(TINY)
    diffusion = GaussianDiffusion(1000, "x0")
    b, n = 2, 5
    x0 = {"code": sequence_table(n).expand(b, n, 16).clone(),
          "content": torch.rand(b, n, 4, 1, 16, 16) * 2 - 1}
    masks = {"code": torch.ones(b, n, dtype=torch.bool), "content": torch.zeros(b, n, dtype=torch.bool)}
    masks["code"][:, 0] = False                                      # anchor
    masks["content"][:, 3] = True
    t = torch.tensor([100, 600])

    def model_fn(xt, tt):
        code_out, content_out = model(xt["code"], xt["content"], tt, masks["content"], ~masks["code"])
        return {"code": code_out, "content": content_out}

    def loss():
        torch.manual_seed(123)                                     # same noise every time
        return diffusion.training_losses(model_fn, x0, masks, {"code": 0.2, "content": 0.8}, t=t)["loss"]

    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    with torch.no_grad():
        before = loss().item()
    for _ in range(10):
        opt.zero_grad()
        loss().backward()
        opt.step()
    with torch.no_grad():
        after = loss().item()
    assert after < 0.8 * before


