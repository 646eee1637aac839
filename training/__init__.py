"""What train.py's reader can skip (not in the paper): starting a run from a checkpoint with --init or --resume
(resume.py), and the exact loss shares of DDP and gradient accumulation (shares.py)."""
