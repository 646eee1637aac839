"""How the scripts run (not in the paper): errors, devices and the checks of a puzzle's settings (cli.py), flags and
how a run starts or resumes (flags.py), the training loop's machinery (training.py) and checkpoints (checkpoint.py)."""
