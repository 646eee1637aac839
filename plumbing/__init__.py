"""
How the scripts run (not in the paper): one-sentence errors, argparse types, devices and autocast (plumbing/cli.py),
the flags both training scripts share, where each setting comes from and how a run starts or resumes
(plumbing/flags.py), the training loop's machinery: processes, resume, data order, micro-batches and the log
(plumbing/training.py), and checkpoints: what they hold (Config, the training files' record) and atomic save / safe load
(plumbing/checkpoint.py). Read it when you change how runs start, resume or save; the scripts import from it, e.g.
`from plumbing.cli import UserError, run_cli`.
"""
