"""
Using a trained model beyond the test metrics: solving your own bag of pieces or raising a clip's frame rate
(solving/own.py: sample.py's --pieces, --frames, --superres and --video, its flag checks and test puzzles;
solving/bag.py: the bag Solver.solve solves), how sure the solver is (solving/confidence.py) and pictures of puzzles,
their pieces put back in place (solving/pictures.py). Paper: the supplement's "Downstream Task: Temporal
Super-resolution" and the JPDVT-S / SI pictures; the confidence is not in the paper. Read it when you use a
checkpoint (`jpdvt.load(path).solve(pieces)` or `python sample.py --ckpt PATH ...`); the method itself is jpdvt.py.
"""
