"""
The paper's settings as plain data, one entry per experiment (paper.py), with the citation of each value.
"""
