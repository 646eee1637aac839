"""How the scripts run (not in the paper), importing nothing of the method: errors, argparse types, the checks of a
puzzle's settings and the device (cli.py)."""
