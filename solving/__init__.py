"""A trained model in a user's hands (`jpdvt.load(path).solve(pieces)`, sample.py's own-data flags): the Solver
(solver.py), bags of pieces (bag.py), your own data and temporal super-resolution (own.py; the supplement's), the
confidence (confidence.py; not in the paper) and pictures, the paper's JPDVT-S / SI columns (pictures.py)."""
