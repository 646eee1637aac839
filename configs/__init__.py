"""The paper's settings as plain data, each value with its citation (configs/paper.py): on by default for the datasets
only the paper's setting makes sense on, and with --paper for the others."""
