"""solving/search.py: swaps of pieces the samples doubt, while the border energy drops."""
import torch

from solving.search import search


def smooth_pieces():
    """A 3x3 puzzle of 8 px pieces cut in raster order from a smooth two-colour ramp: (1, 9, 3, 8, 8)."""
    y, x = torch.meshgrid(torch.linspace(-1, 1, 24), torch.linspace(-1, 1, 24), indexing="ij")
    img = torch.stack([x, y, x * y])                                          # (3, 24, 24)
    return img.unflatten(1, (3, 8)).unflatten(3, (3, 8)).permute(1, 3, 0, 2, 4).reshape(1, 9, 3, 8, 8)


def test_search_fixes_a_doubted_swap_and_keeps_trusted_pieces():
    content, truth = smooth_pieces(), torch.arange(9)[None]
    start = truth.clone()
    start[0, [2, 6]] = start[0, [6, 2]]                                       # pieces 2 and 6 swapped
    own = start[None].repeat(4, 1, 1)
    own[:2, 0, [2, 6]] = torch.tensor([2, 6])                                 # half the samples put them right
    missing = torch.zeros(1, 9, dtype=torch.bool)
    assert torch.equal(search(start, own, content, missing, (3, 3), trust=0.75), truth)
    assert torch.equal(search(start, own, content, missing, (3, 3), trust=0.25), start)   # the samples trusted
