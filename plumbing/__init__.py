"""
How the scripts run: one-sentence errors, argparse types and devices (cli.py), the flags both training scripts share
and how a run starts or resumes (flags.py), and checkpoints: the run's settings (Config, TrainConfig) and atomic
save / safe load (checkpoint.py). Read it when you change how runs start, resume or save.
"""
