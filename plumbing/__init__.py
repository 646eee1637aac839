"""How the scripts run (not in the paper): errors, argparse types, the training and sampling flags, devices and the
checks of a puzzle's settings (cli.py), and reading checkpoints, --init and --resume (checkpoint.py)."""
