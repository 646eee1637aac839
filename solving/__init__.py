"""
Using a trained model beyond the test metrics: solving your own photo, clip or bag of pieces (solving/own.py:
sample.py's --image, --video, --pieces, --frames, --superres, its flag checks and test puzzles; solving/bag.py: the
bag Solver.solve solves), how sure the solver is (solving/confidence.py), pictures of puzzles (solving/pictures.py)
and animations of the sampling (solving/animate.py). Paper: the supplement's "Downstream Task: Temporal
Super-resolution" and the JPDVT-S / SI pictures; the confidence and the animations are not in the paper. Read it
when you use a checkpoint (`jpdvt.load(path).solve(pieces)` or `python sample.py --ckpt PATH ...`); the method
itself is jpdvt.py.
"""
