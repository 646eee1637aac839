"""A trained model in a user's hands (not in the paper): `solving.load(path).solve(pieces)` opens a checkpoint as a
Solver (solver.py) and solves a bag of pieces (bag.py) with each piece's confidence; your own data and temporal
super-resolution on the command line (own.py; the latter is the supplement's); the judge over samples, an option
(judge.py)."""


def load(path, device="auto", precision="fp32"):
    """A trained checkpoint ready to solve your own pieces: `solving.load(path).solve(pieces)` (solving/solver.py).
    device: auto (a CUDA GPU, else a Mac's GPU, else the CPU), cpu, cuda, cuda:N or mps; precision: fp32 (every
    figure's), or bf16 / fp16 autocast on a GPU."""
    from solving.solver import load_solver  # here, so that `import solving.judge` loads no network
    return load_solver(path, device, precision)
